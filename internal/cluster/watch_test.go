package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// The Watch tests run against a real API server, started the first time a
// test needs it and stopped by TestMain.
var shared testenv.Lazy

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// controlPlane returns the shared API server and a client for it.
func controlPlane(t *testing.T) (*testenv.Env, client.Client) {
	t.Helper()
	env := shared.Get(t)
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return env, c
}

// watchServer serves the Cluster service from a cache of ConfigMaps in every
// namespace, on a unix socket, and returns a client for it and a namespace of
// its own to work in. The server and the cache stop when the test ends.
func watchServer(t *testing.T, opts Options) (*Server, polyopv1alpha1.ClusterServiceClient, client.Client, string) {
	t.Helper()
	e, c := controlPlane(t)
	ns := fmt.Sprintf("watch-%d", time.Now().UnixNano())
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	mapper, informers := configMapCache(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	cacheDone := make(chan struct{})
	go func() { defer close(cacheDone); _ = informers.Start(ctx) }()

	opts.CachedKinds = map[schema.GroupVersionKind][]string{configMapGVK: nil}
	s := New(Clients{Cache: informers, Mapper: mapper, Informers: informers}, opts)
	if err := s.Listen("unix://" + filepath.Join(t.TempDir(), "cluster.sock")); err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = s.Start(ctx) }()
	conn, err := grpc.NewClient(s.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		<-served
		<-cacheDone
	})
	return s, polyopv1alpha1.NewClusterServiceClient(conn), c, ns
}

// configMapCache is an informer cache of ConfigMaps as the host builds it:
// holding object.Objects, read as JSON.
func configMapCache(t *testing.T, e *testenv.Env) (meta.RESTMapper, cache.Cache) {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(configMapGVK, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	scheme := kruntime.NewScheme()
	object.AddToScheme(scheme, configMapGVK)
	cfg := rest.CopyConfig(e.Config)
	cfg.ContentType = kruntime.ContentTypeJSON
	informers, err := cache.New(cfg, cache.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	return mapper, informers
}

// events reads a Watch stream's events on a channel, closed with the
// stream's end, whose error it then holds.
type events struct {
	ch  chan *polyopv1alpha1.WatchResponse
	err error
}

func watch(t *testing.T, ctx context.Context, cs polyopv1alpha1.ClusterServiceClient, req *polyopv1alpha1.WatchRequest) *events {
	t.Helper()
	if req.Kind == nil {
		req.Kind = configMap
	}
	stream, err := cs.Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{ch: make(chan *polyopv1alpha1.WatchResponse, 1000)}
	go func() {
		defer close(ev.ch)
		for {
			resp, err := stream.Recv()
			if err != nil {
				ev.err = err
				return
			}
			ev.ch <- resp
		}
	}()
	return ev
}

// next is the stream's next event other than a BOOKMARK, as "TYPE name", or
// "END code" when the stream ended.
func (ev *events) next(t *testing.T) (string, *polyopv1alpha1.WatchResponse) {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case resp, ok := <-ev.ch:
			if !ok {
				return "END " + status.Code(ev.err).String(), nil
			}
			typ := strings.TrimPrefix(resp.GetType().String(), "WATCH_EVENT_TYPE_")
			if typ == "BOOKMARK" {
				continue
			}
			if len(resp.GetObject()) == 0 {
				return typ, resp
			}
			var obj metav1.PartialObjectMetadata
			if err := json.Unmarshal(resp.GetObject(), &obj); err != nil {
				t.Fatal(err)
			}
			if obj.Kind != "ConfigMap" || obj.ResourceVersion != resp.GetResourceVersion() {
				t.Errorf("event %s %s: kind %q, resourceVersion %q beside %q", typ, obj.Name, obj.Kind, obj.ResourceVersion, resp.GetResourceVersion())
			}
			return typ + " " + obj.Name, resp
		case <-timeout:
			t.Fatal("no watch event within 2m")
		}
	}
}

// expect reads the next events, which must be want, in any order among
// events of the same type.
func (ev *events) expect(t *testing.T, want ...string) *polyopv1alpha1.WatchResponse {
	t.Helper()
	var got []string
	var last *polyopv1alpha1.WatchResponse
	for range want {
		var e string
		e, last = ev.next(t)
		got = append(got, e)
	}
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("watch events %q, want %q", got, want)
	}
	return last
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func configMapIn(ns, name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

func TestWatchListsTheCacheThenStreamsItsChanges(t *testing.T) {
	_, cs, c, ns := watchServer(t, Options{})
	ctx := context.Background()
	x := map[string]string{"app": "x"}
	for _, cm := range []*corev1.ConfigMap{configMapIn(ns, "a", x), configMapIn(ns, "b", x), configMapIn(ns, "other", map[string]string{"app": "y"})} {
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	// The cache may not hold them all yet: wait for a list that does.
	testenv.Eventually(t, 30*time.Second, "the cache holds the three ConfigMaps", func() (bool, string) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ev := watch(t, wctx, cs, &polyopv1alpha1.WatchRequest{Namespace: ns})
		var got []string
		for {
			e, _ := ev.next(t)
			if e == "INITIAL_LIST_DONE" {
				return len(got) == 3, fmt.Sprint(got)
			}
			got = append(got, e)
		}
	})

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ev := watch(t, wctx, cs, &polyopv1alpha1.WatchRequest{Namespace: ns, LabelSelector: "app=x"})
	ev.expect(t, "ADDED a", "ADDED b")
	if done, resp := ev.next(t); done != "INITIAL_LIST_DONE" || resp.GetResourceVersion() == "" || len(resp.GetObject()) != 0 {
		t.Fatalf("after the initial list: %s %v, want INITIAL_LIST_DONE with a resource version", done, resp)
	}
	byName := watch(t, wctx, cs, &polyopv1alpha1.WatchRequest{Namespace: ns, FieldSelector: "metadata.name=b"})
	byName.expect(t, "ADDED b", "INITIAL_LIST_DONE")

	a := configMapIn(ns, "a", x)
	if err := c.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
		t.Fatal(err)
	}
	a.Data = map[string]string{"k": "v"}
	if err := c.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	ev.expect(t, "MODIFIED a")
	if err := c.Delete(ctx, configMapIn(ns, "b", nil)); err != nil {
		t.Fatal(err)
	}
	ev.expect(t, "DELETED b")
	byName.expect(t, "DELETED b")
	// A ConfigMap the selector leaves out is not sent: the next event is the
	// one created after it.
	if err := c.Create(ctx, configMapIn(ns, "left-out", map[string]string{"app": "y"})); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, configMapIn(ns, "c", x)); err != nil {
		t.Fatal(err)
	}
	ev.expect(t, "ADDED c")
	// A change that takes an object out of the selection is a DELETED, one
	// that brings it in an ADDED, as the API server reports them.
	relabel := func(name, app string) {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			t.Fatal(err)
		}
		cm.Labels = map[string]string{"app": app}
		if err := c.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	relabel("c", "y")
	ev.expect(t, "DELETED c")
	relabel("left-out", "x")
	ev.expect(t, "ADDED left-out")
}

func TestWatchRefusesWhatItCannotServe(t *testing.T) {
	_, cs, _, ns := watchServer(t, Options{})
	for name, tc := range map[string]struct {
		req  *polyopv1alpha1.WatchRequest
		code codes.Code
		says string
	}{
		"if the field selector names another field, then INVALID_ARGUMENT": {
			req: &polyopv1alpha1.WatchRequest{Namespace: ns, FieldSelector: "data.k=v"}, code: codes.InvalidArgument, says: "metadata.name and metadata.namespace only",
		},
		"if the label selector does not parse, then INVALID_ARGUMENT": {
			req: &polyopv1alpha1.WatchRequest{Namespace: ns, LabelSelector: "a in (b"}, code: codes.InvalidArgument, says: "label_selector",
		},
		"if the host does not cache the kind, then FAILED_PRECONDITION naming the remedy": {
			req: &polyopv1alpha1.WatchRequest{Kind: namespace}, code: codes.FailedPrecondition, says: "declare Namespace for cached reads in the sidecar (a cached kind in its description: CacheKind in Go",
		},
	} {
		t.Run(name, func(t *testing.T) {
			ev := watch(t, context.Background(), cs, tc.req)
			if e, _ := ev.next(t); e != "END "+tc.code.String() || !strings.Contains(ev.err.Error(), tc.says) {
				t.Fatalf("got %s: %v, want %s saying %q", e, ev.err, tc.code, tc.says)
			}
		})
	}
}

func TestWatchResumesAfterARecentVersionAndRefusesAnExpiredOne(t *testing.T) {
	_, cs, c, ns := watchServer(t, Options{WatchHistory: 3})
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if err := c.Create(ctx, configMapIn(ns, name, nil)); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	ev := watch(t, wctx, cs, &polyopv1alpha1.WatchRequest{Namespace: ns})
	// The ConfigMaps arrive in the initial list or as events, as the cache
	// has them; either way the last message's version is the one to resume
	// from once both were seen and the initial list is done. (An object's
	// own version in the initial list may be older than the host's memory,
	// which starts when the first stream of the kind does.)
	var seen []string
	var resume string
	for listed := false; len(seen) < 2 || !listed; {
		e, resp := ev.next(t)
		resume = resp.GetResourceVersion()
		if e == "INITIAL_LIST_DONE" {
			listed = true
			continue
		}
		if !slices.Contains([]string{"ADDED a", "ADDED b"}, e) {
			t.Fatalf("unexpected %s", e)
		}
		seen = append(seen, e)
	}
	cancel()

	b := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, b); err != nil {
		t.Fatal(err)
	}
	b.Data = map[string]string{"k": "v"}
	if err := c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, configMapIn(ns, "a", nil)); err != nil {
		t.Fatal(err)
	}
	// Once the host has seen the delete, a stream resumed from before the
	// update gets the update and the delete, and no initial list.
	testenv.Eventually(t, 30*time.Second, "the host sees the delete", func() (bool, string) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		probe := watch(t, wctx, cs, &polyopv1alpha1.WatchRequest{Namespace: ns, FieldSelector: "metadata.name=a"})
		e, _ := probe.next(t)
		return e == "INITIAL_LIST_DONE", e
	})
	wctx, cancel = context.WithCancel(ctx)
	defer cancel()
	resumed := watch(t, wctx, cs, &polyopv1alpha1.WatchRequest{Namespace: ns, ResourceVersion: resume})
	resumed.expect(t, "MODIFIED b")
	resumed.expect(t, "DELETED a")
	if err := c.Create(ctx, configMapIn(ns, "c", nil)); err != nil {
		t.Fatal(err)
	}
	resumed.expect(t, "ADDED c") // and not INITIAL_LIST_DONE before it

	// Three more changes push the update out of the host's three.
	for _, name := range []string{"d", "e", "f"} {
		if err := c.Create(ctx, configMapIn(ns, name, nil)); err != nil {
			t.Fatal(err)
		}
		resumed.expect(t, "ADDED "+name)
	}
	expired := watch(t, ctx, cs, &polyopv1alpha1.WatchRequest{Namespace: ns, ResourceVersion: resume})
	if e, _ := expired.next(t); e != "END FailedPrecondition" || !strings.Contains(expired.err.Error(), "expired") || !strings.Contains(expired.err.Error(), "relist") {
		t.Fatalf("resuming from an expired version: %s %v, want FAILED_PRECONDITION saying expired, relist", e, expired.err)
	}
}

func TestWatchCutsOffAClientThatDoesNotRead(t *testing.T) {
	s, cs, c, ns := watchServer(t, Options{WatchBuffer: 10})
	ctx := context.Background()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := cs.Watch(wctx, &polyopv1alpha1.WatchRequest{Kind: configMap, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.GetType() != polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_INITIAL_LIST_DONE {
		t.Fatalf("first event %v, %v; want INITIAL_LIST_DONE", resp, err)
	}
	// The client reads no more. Large ConfigMaps fill gRPC's flow control
	// window, then the stream's buffer of 10.
	big := strings.Repeat("x", 100_000)
	for i := 0; s.watchers() > 0; i++ {
		if i == 200 {
			t.Fatal("200 large ConfigMaps later, the stream that reads nothing is still served")
		}
		cm := configMapIn(ns, fmt.Sprintf("big-%d", i), nil)
		cm.Data = map[string]string{"x": big}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	for {
		_, err := stream.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "fell more than 10 events behind") {
			t.Fatalf("the stream ended with %v, want RESOURCE_EXHAUSTED saying it fell behind", err)
		}
		break
	}
}

func TestWatchFreesItsResourcesWhenTheClientGoesOrTheHostStops(t *testing.T) {
	s, cs, c, ns := watchServer(t, Options{})
	ctx := context.Background()
	if err := c.Create(ctx, configMapIn(ns, "a", nil)); err != nil {
		t.Fatal(err)
	}
	// A first stream sets up the kind's hub, which stays.
	first, cancelFirst := context.WithCancel(ctx)
	watch(t, first, cs, &polyopv1alpha1.WatchRequest{Namespace: ns, FieldSelector: "metadata.name=none"}).expect(t, "INITIAL_LIST_DONE")
	cancelFirst()
	testenv.Eventually(t, 30*time.Second, "the first stream is gone", func() (bool, string) {
		return s.watchers() == 0, fmt.Sprint(s.watchers(), " streams")
	})
	before := runtime.NumGoroutine()

	var cancels []context.CancelFunc
	for range 20 {
		wctx, cancel := context.WithCancel(ctx)
		cancels = append(cancels, cancel)
		ev := watch(t, wctx, cs, &polyopv1alpha1.WatchRequest{Namespace: ns, FieldSelector: "metadata.name=none"})
		ev.expect(t, "INITIAL_LIST_DONE")
	}
	if n := s.watchers(); n != 20 {
		t.Fatalf("%d streams served, want 20", n)
	}
	for _, cancel := range cancels {
		cancel()
	}
	testenv.Eventually(t, 30*time.Second, "every stream and its goroutines are gone", func() (bool, string) {
		n, g := s.watchers(), runtime.NumGoroutine()
		return n == 0 && g <= before, fmt.Sprintf("%d streams, %d goroutines (%d before)", n, g, before)
	})
}

func TestWatchEndsWhenTheHostStops(t *testing.T) {
	e, _ := controlPlane(t)
	mapper, informers := configMapCache(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = informers.Start(ctx) }()
	s := New(Clients{Cache: informers, Mapper: mapper, Informers: informers},
		Options{CachedKinds: map[schema.GroupVersionKind][]string{configMapGVK: nil}})
	if err := s.Listen("unix://" + filepath.Join(t.TempDir(), "cluster.sock")); err != nil {
		t.Fatal(err)
	}
	hostCtx, stopHost := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = s.Start(hostCtx) }()
	conn, err := grpc.NewClient(s.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ev := watch(t, ctx, polyopv1alpha1.NewClusterServiceClient(conn), &polyopv1alpha1.WatchRequest{Namespace: "kube-system", FieldSelector: "metadata.name=none"})
	ev.expect(t, "INITIAL_LIST_DONE")
	stopHost()
	select {
	case <-stopped:
	case <-time.After(2 * time.Minute):
		t.Fatal("the host did not stop within 2m with a Watch open")
	}
	if e, _ := ev.next(t); e != "END Unavailable" || !strings.Contains(ev.err.Error(), "shutting down") {
		t.Fatalf("the stream ended with %s %v, want UNAVAILABLE saying the host is shutting down", e, ev.err)
	}
}
