package client

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/internal/cacheversions"
)

var _ ctrlclient.FieldIndexer = (*Client)(nil)

// localIndexes are the kinds a Client indexes itself, with Go index funcs
// the host cannot run, and the copies of their objects it keeps.
type localIndexes struct {
	mu     sync.Mutex
	funcs  map[schema.GroupVersionKind]map[string]ctrlclient.IndexerFunc
	stores map[storeKey]*localStore
}

// storeKey names a copy: a kind, in one namespace or ("") in every one, so
// that a host that caches the kind in some namespaces only serves the copy of
// each.
type storeKey struct {
	gvk       schema.GroupVersionKind
	namespace string
}

// localStore holds every object of one kind in one namespace (or every one)
// that the host caches, kept by a Watch, and the values of its index funcs.
// It starts on the first List that needs it.
//
// Its states, as an informer's: syncing (listing, Lists wait for it),
// synced (Lists are answered from it; while its Watch resumes after an
// interruption it serves what it holds, as an informer does), and failed (its
// Watch ended with an error it cannot resume from: every List fails at once,
// naming the error, while the copy watches again after a backoff, until a
// new Watch has listed every object).
type localStore struct {
	key   storeKey
	funcs map[string]ctrlclient.IndexerFunc
	log   logr.Logger

	start sync.Once

	mu      sync.RWMutex
	objects map[ctrlclient.ObjectKey]ctrlclient.Object
	// values[field][value] are the keys of the objects whose index func for
	// field gives value.
	values map[string]map[string]map[ctrlclient.ObjectKey]struct{}
	// synced is set while the copy holds every object the host caches.
	synced bool
	// failure is the error that ended the copy's last Watch, while the copy
	// is being rebuilt; nil once a Watch has listed every object again.
	failure error
	// failures counts the Watches that failed since the copy was last
	// synced; retry is when the next one starts.
	failures int
	retry    time.Time
	// lastErr is the last error the Watch met, failed or resumed from.
	lastErr error
	// settled is closed while the copy is synced or failed, the states a
	// List does not wait in.
	settled chan struct{}
	// seen is the resource version of the last message the Watch delivered
	// since it listed (an event, a bookmark, or the end of its list): the
	// copy holds every change up to it.
	seen uint64
	// advanced, while a List waits for seen to grow (catchUp), is closed
	// (and cleared) the next time it grows or the copy's state changes.
	advanced chan struct{}
}

// cacheVersionWait caps how long a List waits for its copy to catch up with
// the version its call names (see catchUp).
var cacheVersionWait = 10 * time.Second

// IndexField implements controller-runtime's client.FieldIndexer: List of
// obj's kind with client.MatchingFields{field: value} is then answered by the
// Client itself, from a copy of every object of the kind it keeps through the
// host's Watch stream, selected by extractValue as controller-runtime's cache
// would. There is one copy per namespace a List names with InNamespace (and
// one for Lists of every namespace), so that a host that caches the kind in
// some namespaces only can serve them. A copy starts on the first such List,
// which waits (bounded by its ctx) until the copy holds every object the host
// caches. Only kinds the host caches can be indexed so. Register every index
// before the first List of the kind.
//
// A List in a Reconcile or Finalize call (its ctx) reads its trigger, as in
// a manager: it first waits until the copy has the version of the kind the
// call names (the host's cache version, which holds every change its
// controller had seen when it called), for at most 10s within ctx, and fails
// naming the kind, the namespace and both versions when the copy does not
// get there.
//
// A copy recovers as an informer does. When its Watch is interrupted (the
// host restarted, or cut a slow reader off) it resumes from the last version,
// serving what it holds meanwhile; when the host no longer remembers that
// version it lists again, and Lists wait for it. When the Watch fails (the
// host does not cache the kind, or not in that namespace), every List by the
// copy's indexes fails at once with an error that names the kind, the index,
// the namespace, the Watch's error and what to do, while the copy watches
// again after 0.8s, then after twice as long each time, up to every 30s, for
// as long as the Client lives; once a Watch has listed every object, Lists
// succeed again.
func (c *Client) IndexField(_ context.Context, obj ctrlclient.Object, field string, extractValue ctrlclient.IndexerFunc) error {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	c.indexes.mu.Lock()
	defer c.indexes.mu.Unlock()
	if c.indexes.funcs == nil {
		c.indexes.funcs = map[schema.GroupVersionKind]map[string]ctrlclient.IndexerFunc{}
		c.indexes.stores = map[storeKey]*localStore{}
	}
	if c.indexes.funcs[gvk] == nil {
		c.indexes.funcs[gvk] = map[string]ctrlclient.IndexerFunc{}
	}
	if _, ok := c.indexes.funcs[gvk][field]; ok {
		return fmt.Errorf("polyop client: an index for %s field %q is already registered", gvk.Kind, field)
	}
	c.indexes.funcs[gvk][field] = extractValue
	return nil
}

// store is the copy of gvk's objects in namespace, made on first use.
func (c *Client) store(gvk schema.GroupVersionKind, namespace string) *localStore {
	c.indexes.mu.Lock()
	defer c.indexes.mu.Unlock()
	key := storeKey{gvk: gvk, namespace: namespace}
	s, ok := c.indexes.stores[key]
	if !ok {
		s = &localStore{key: key, funcs: c.indexes.funcs[gvk], log: c.log, settled: make(chan struct{}),
			objects: map[ctrlclient.ObjectKey]ctrlclient.Object{}, values: map[string]map[string]map[ctrlclient.ObjectKey]struct{}{}}
		for field := range s.funcs {
			s.values[field] = map[string]map[ctrlclient.ObjectKey]struct{}{}
		}
		c.indexes.stores[key] = s
	}
	return s
}

// listIndexed answers a List from a local index when its field selector is
// one exact value of a field indexed for the kind, and reports whether it
// did.
func (c *Client) listIndexed(ctx context.Context, list ctrlclient.ObjectList, listGVK schema.GroupVersionKind, lo *ctrlclient.ListOptions) (bool, error) {
	if lo.FieldSelector == nil || lo.Continue != "" {
		return false, nil
	}
	reqs := lo.FieldSelector.Requirements()
	if len(reqs) != 1 || reqs[0].Operator != "=" && reqs[0].Operator != "==" {
		return false, nil
	}
	gvk := listKind(listGVK)
	c.indexes.mu.Lock()
	_, indexed := c.indexes.funcs[gvk][reqs[0].Field]
	c.indexes.mu.Unlock()
	if !indexed {
		return false, nil
	}
	field := reqs[0].Field
	s := c.store(gvk, lo.Namespace)
	s.start.Do(func() { go s.run(c.background, c) })
	if want, ok := cacheversions.For(ctx, gvk); ok {
		if err := s.catchUp(ctx, want, field); err != nil {
			return true, err
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for !s.synced {
		if s.failure != nil {
			return true, s.failed(field)
		}
		settled := s.settled
		s.mu.RUnlock()
		select {
		case <-settled:
			s.mu.RLock()
		case <-ctx.Done():
			s.mu.RLock()
			err := fmt.Errorf("listing %s by the index %q: waiting for the sidecar's copy of every %s %s to list them all: %w",
				describeList(gvk, lo.Namespace), field, gvk.Kind, where(lo.Namespace), ctx.Err())
			if s.lastErr != nil {
				err = fmt.Errorf("%w; its Watch's last error: %w", err, s.lastErr)
			}
			return true, err
		}
	}
	var selected []ctrlclient.Object
	for key := range s.values[field][reqs[0].Value] {
		obj := s.objects[key]
		if lo.Namespace != "" && obj.GetNamespace() != lo.Namespace {
			continue
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		selected = append(selected, obj)
	}
	return true, fillList(list, listGVK, selected)
}

// catchUp waits until the copy has delivered a message at or after version
// want, the version the call ctx serves names for the kind
// (ReconcileRequest.cache_versions): the host has put one on the copy's
// Watch stream, after every change of the kind its controllers had seen when
// it made the call, so that the List finds what triggered the call. It
// waits at most cacheVersionWait, bounded by ctx, and fails with an error
// naming the kind, the namespace, the version awaited and the last one
// delivered. A copy that failed returns at once: the List reports that. A
// copy still listing is waited for: its list ends at a version at or after
// want.
func (s *localStore) catchUp(ctx context.Context, want uint64, field string) error {
	var timeout <-chan time.Time
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.seen < want && s.failure == nil {
		if s.advanced == nil {
			s.advanced = make(chan struct{})
		}
		advanced := s.advanced
		s.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(cacheVersionWait)
			defer t.Stop()
			timeout = t.C
		}
		var cause error
		select {
		case <-advanced:
		case <-timeout:
			cause = fmt.Errorf("gave up after %s", cacheVersionWait)
		case <-ctx.Done():
			cause = ctx.Err()
		}
		s.mu.Lock()
		if cause != nil && s.seen < want {
			gvk, ns := s.key.gvk, s.key.namespace
			err := fmt.Errorf("listing %s by the index %q: the sidecar's copy of every %s %s has not caught up with the host's cache: "+
				"this call reads it at or after resource version %d (the host's, when it made the call), and its Watch has delivered up to %d only: %w",
				describeList(gvk, ns), field, gvk.Kind, where(ns), want, s.seen, cause)
			if s.lastErr != nil {
				err = fmt.Errorf("%w; its Watch's last error: %w", err, s.lastErr)
			}
			return err
		}
	}
	return nil
}

// advance records that the Watch delivered a message at version rv (a
// decimal integer; anything else is ignored), waking the Lists that wait
// for it. s.mu is held.
func (s *localStore) advance(rv string) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || v <= s.seen {
		return
	}
	s.seen = v
	s.wake()
}

// wake wakes the Lists waiting in catchUp. s.mu is held.
func (s *localStore) wake() {
	if s.advanced != nil {
		close(s.advanced)
		s.advanced = nil
	}
}

// fillList sets list's items to copies of objs: deep copies when list holds
// their Go type, as controller-runtime's cache copies, else through their
// JSON (an unstructured list of a kind the scheme knows, or metadata only).
func fillList(list ctrlclient.ObjectList, listGVK schema.GroupVersionKind, objs []ctrlclient.Object) error {
	copies := make([]runtime.Object, len(objs))
	for i, obj := range objs {
		copies[i] = obj.DeepCopyObject()
	}
	if _, unstructured := list.(*unstructured.UnstructuredList); !unstructured {
		if err := meta.SetList(list, copies); err == nil {
			list.GetObjectKind().SetGroupVersionKind(listGVK)
			list.SetResourceVersion("")
			list.SetContinue("")
			return nil
		}
	}
	resp := &polyopv1alpha1.ListResponse{Items: make([][]byte, len(objs))}
	for i, obj := range objs {
		raw, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		resp.Items[i] = raw
	}
	return decodeList(resp, list, listGVK)
}

// copyRetry bounds the wait before a local copy whose Watch failed watches
// again: from the first, doubling after each failure, to the second, as
// client-go's reflector backs off; a copy that synced starts again from the
// first. It retries for as long as the Client lives.
var copyRetry = [2]time.Duration{800 * time.Millisecond, 30 * time.Second}

// run keeps the store up to date from Watches of the kind until ctx ends,
// watching again, after a backoff, whenever one fails.
func (s *localStore) run(ctx context.Context, c *Client) {
	wait := copyRetry[0]
	for {
		err := s.follow(ctx, c)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if s.failure == nil {
			wait = copyRetry[0] // it synced since the last failure
		}
		s.fail(err, wait)
		s.mu.Unlock()
		s.log.Error(err, "the sidecar's copy of a kind it indexes cannot follow the host's Watch: Lists by its indexes fail until it has watched again",
			"kind", s.key.gvk.String(), "namespace", s.key.namespace, "indexes", s.fields(), "retryIn", wait.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, copyRetry[1])
	}
}

// follow applies one Watch's events to the store until the Watch fails,
// and returns why (or nil when ctx ended).
func (s *localStore) follow(ctx context.Context, c *Client) error {
	lo := &ctrlclient.ListOptions{Namespace: s.key.namespace}
	events := c.watch(ctx, s.key.gvk, lo, s.resuming, true)
	for ev := range events {
		switch ev.Type {
		case Added, Modified:
			s.put(ev.Object, ev.rv)
		case Deleted:
			s.remove(ctrlclient.ObjectKeyFromObject(ev.Object), ev.rv)
		case bookmark:
			s.mu.Lock()
			s.advance(ev.rv)
			s.mu.Unlock()
		case Synced:
			s.mu.Lock()
			s.failure, s.failures, s.lastErr = nil, 0, nil
			s.synced = true
			s.settle()
			s.advance(ev.rv)
			s.mu.Unlock()
		case Error:
			return ev.Err
		}
	}
	return nil
}

// resuming is told when the Watch, interrupted by err, resumes: from its last
// version (the copy keeps serving what it holds, as an informer's does), or,
// when relist is set, by listing again because the host no longer remembers
// that version: the copy missed changes, and Lists wait until it has them.
func (s *localStore) resuming(err error, relist bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr = err
	if relist {
		s.synced = false
		s.settle()
	}
}

// fail records that the Watch failed with err and watches again after wait.
// The copy is emptied: the next Watch lists every object again. s.mu is
// held.
func (s *localStore) fail(err error, wait time.Duration) {
	s.failure, s.lastErr = err, err
	s.failures++
	s.retry = time.Now().Add(wait)
	s.objects = map[ctrlclient.ObjectKey]ctrlclient.Object{}
	for field := range s.funcs {
		s.values[field] = map[string]map[ctrlclient.ObjectKey]struct{}{}
	}
	s.synced = false
	s.settle()
	s.wake()
}

// settle makes settled closed exactly while the copy is synced or failed,
// after either changed. s.mu is held.
func (s *localStore) settle() {
	settled, closed := s.synced || s.failure != nil, isClosed(s.settled)
	switch {
	case settled && !closed:
		close(s.settled)
	case !settled && closed:
		s.settled = make(chan struct{})
	}
}

// failed is the error of a List by the index field while the copy is
// failed, naming the kind, the namespace, the index, the Watch's error and
// what to do. s.mu is held.
func (s *localStore) failed(field string) error {
	gvk, ns := s.key.gvk, s.key.namespace
	retry := max(time.Until(s.retry), 0).Round(time.Millisecond)
	return fmt.Errorf("listing %s by the index %q: the sidecar's copy of every %s %s, which answers Lists by its indexes, "+
		"is not in step with the host: its Watch failed, %d time(s) in a row (it watches again in %s; Lists succeed once it has listed every object again): %w%s",
		describeList(gvk, ns), field, gvk.Kind, where(ns), s.failures, retry, s.failure, remedy(s.failure, gvk))
}

// remedy is what to do about a Watch that failed with err, as a sentence
// that follows it; "" when the host's own message is all there is to say.
func remedy(err error, gvk schema.GroupVersionKind) string {
	switch status.Code(err) {
	case codes.FailedPrecondition:
		return ". The host watches only what it caches: in Go, declare " + gvk.Kind + " for cached reads with sidecar.Server.CacheKind " +
			"(its Namespaces option names the namespaces), or with a controller that reconciles, owns or watches it; the host reads them when it starts"
	case codes.NotFound:
		return ". Check that the cluster serves " + gvk.GroupVersion().String() + " " + gvk.Kind + " (for a custom resource, that its CustomResourceDefinition is installed)"
	case codes.Unimplemented:
		return ". The host does not serve the Cluster service's Watch: run a polyop host that does"
	}
	return ""
}

// where names a namespace in messages: "in ns", or "in every namespace".
func where(namespace string) string {
	if namespace == "" {
		return "in every namespace"
	}
	return "in " + namespace
}

// fields are the names of the store's indexes, sorted.
func (s *localStore) fields() []string {
	return slices.Sorted(maps.Keys(s.funcs))
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// put adds or replaces obj, delivered at version rv ("" while listing).
func (s *localStore) put(obj ctrlclient.Object, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.advance(rv)
	key := ctrlclient.ObjectKeyFromObject(obj)
	s.unindex(key)
	obj.GetObjectKind().SetGroupVersionKind(s.key.gvk)
	s.objects[key] = obj
	for field, fn := range s.funcs {
		for _, v := range fn(obj) {
			if s.values[field][v] == nil {
				s.values[field][v] = map[ctrlclient.ObjectKey]struct{}{}
			}
			s.values[field][v][key] = struct{}{}
		}
	}
}

// remove drops the object at key, deleted at version rv ("" while listing).
func (s *localStore) remove(key ctrlclient.ObjectKey, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.advance(rv)
	s.unindex(key)
	delete(s.objects, key)
}

// unindex drops the index values of the object at key.
func (s *localStore) unindex(key ctrlclient.ObjectKey) {
	old, ok := s.objects[key]
	if !ok {
		return
	}
	for field, fn := range s.funcs {
		for _, v := range fn(old) {
			delete(s.values[field][v], key)
			if len(s.values[field][v]) == 0 {
				delete(s.values[field], v)
			}
		}
	}
}
