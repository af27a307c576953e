package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
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
type localStore struct {
	key   storeKey
	funcs map[string]ctrlclient.IndexerFunc

	start  sync.Once
	synced chan struct{}

	mu      sync.RWMutex
	objects map[ctrlclient.ObjectKey]ctrlclient.Object
	// values[field][value] are the keys of the objects whose index func for
	// field gives value.
	values map[string]map[string]map[ctrlclient.ObjectKey]struct{}
	err    error
}

// IndexField implements controller-runtime's client.FieldIndexer: List of
// obj's kind with client.MatchingFields{field: value} is then answered by the
// Client itself, from a copy of every object of the kind it keeps through the
// host's Watch stream, selected by extractValue as controller-runtime's cache
// would. There is one copy per namespace a List names with InNamespace (and
// one for Lists of every namespace), so that a host that caches the kind in
// some namespaces only can serve them. A copy starts on the first such List,
// which waits (bounded by its ctx) until the copy holds every object the host
// caches. Only kinds the host
// caches can be indexed so. Register every index before the first List of the
// kind.
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
		s = &localStore{key: key, funcs: c.indexes.funcs[gvk], synced: make(chan struct{}),
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
	s := c.store(gvk, lo.Namespace)
	s.start.Do(func() { go s.run(c.background, c) })
	select {
	case <-s.synced:
	case <-ctx.Done():
		return true, fmt.Errorf("listing %s by the index %q: waiting for the sidecar's copy of every %s: %w", describeList(gvk, lo.Namespace), reqs[0].Field, gvk.Kind, ctx.Err())
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.err != nil {
		return true, s.err
	}
	var items []json.RawMessage
	for key := range s.values[reqs[0].Field][reqs[0].Value] {
		obj := s.objects[key]
		if lo.Namespace != "" && obj.GetNamespace() != lo.Namespace {
			continue
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			return true, err
		}
		items = append(items, raw)
	}
	resp := &polyopv1alpha1.ListResponse{Items: make([][]byte, len(items))}
	for i, item := range items {
		resp.Items[i] = item
	}
	return true, decodeList(resp, list, listGVK)
}

// run keeps the store up to date from a Watch of the kind until ctx ends.
func (s *localStore) run(ctx context.Context, c *Client) {
	var opts []ctrlclient.ListOption
	if s.key.namespace != "" {
		opts = append(opts, ctrlclient.InNamespace(s.key.namespace))
	}
	events, err := c.Watch(ctx, newList(c, s.key.gvk), opts...)
	if err != nil {
		s.fail(err)
		return
	}
	synced := false
	for ev := range events {
		switch ev.Type {
		case Added, Modified:
			s.put(ev.Object)
		case Deleted:
			s.remove(ctrlclient.ObjectKeyFromObject(ev.Object))
		case Synced:
			if !synced {
				synced = true
				close(s.synced)
			}
		case Error:
			s.fail(ev.Err)
			if !synced {
				close(s.synced)
			}
			return
		}
	}
}

func (s *localStore) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = fmt.Errorf("the sidecar's index of %s: %w", s.key.gvk.Kind, err)
}

func (s *localStore) put(obj ctrlclient.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
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

func (s *localStore) remove(key ctrlclient.ObjectKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
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

// newList is an empty list of kind gvk's objects.
func newList(c *Client, gvk schema.GroupVersionKind) ctrlclient.ObjectList {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if o, err := c.scheme.New(listGVK); err == nil {
		if l, ok := o.(ctrlclient.ObjectList); ok {
			return l
		}
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(listGVK)
	return l
}
