package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

func TestCacheProgressKeepsTheNewestVersionSeenOfEachKind(t *testing.T) {
	p := NewCacheProgress()
	secretGVK := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	for _, rv := range []string{"7", "12", "9", "", "not-a-version"} {
		p.Seen(configMapGVK, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}})
	}
	p.Seen(secretGVK, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "3"}})
	if got := p.seenVersion(configMapGVK); got != 12 {
		t.Errorf("seen ConfigMap version %d, want 12, the newest", got)
	}
	if got := p.seenVersion(secretGVK); got != 3 {
		t.Errorf("seen Secret version %d, want 3", got)
	}
	if got := p.seenVersion(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}); got != 0 {
		t.Errorf("seen Deployment version %d, want 0: none seen", got)
	}

	// Concurrent handlers: the newest wins.
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			p.Seen(secretGVK, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{ResourceVersion: fmt.Sprint(100 + i)}})
		})
	}
	wg.Wait()
	if got := p.seenVersion(secretGVK); got != 199 {
		t.Errorf("seen Secret version %d after concurrent events, want 199", got)
	}

	// No server, or a server without Watch streams: no versions, at once.
	if v := p.Versions(context.Background()); v != nil {
		t.Errorf("versions without a server: %v, want none", v)
	}
	New(Clients{}, Options{Progress: p})
	if v := p.Versions(context.Background()); v != nil {
		t.Errorf("versions without Watch streams: %v, want none", v)
	}
}

func TestCacheProgressTimesOutOnAKindItsStreamsNeverReach(t *testing.T) {
	p := NewCacheProgress()
	p.Timeout = 50 * time.Millisecond
	s := New(Clients{}, Options{Progress: p})
	h := &hub{gvk: configMapGVK, objects: map[ctrlclient.ObjectKey]ctrlclient.Object{}, subs: map[*subscriber]struct{}{}, latest: 5}
	sub := &subscriber{match: func(ctrlclient.Object) bool { return true }, ch: make(chan watchEvent, 10), overflowed: make(chan struct{})}
	if _, _, err := h.subscribe(sub, ""); err != nil {
		t.Fatal(err)
	}
	s.hubs[configMapGVK] = h
	s.hubList.Store(&[]*hub{h})
	p.Seen(configMapGVK, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9"}})

	v := p.Versions(context.Background())
	if len(v) != 1 || v[0].GetKind().GetKind() != "ConfigMap" || v[0].GetResourceVersion() != "5" {
		t.Fatalf("versions %v, want ConfigMap at 5, what its streams have", v)
	}
	// The hub records 9: the next call waits for it, and its stream gets
	// the change, then nothing more (it has nothing older than 9).
	h.record(polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_ADDED, configMapIn("ns", "a", nil).DeepCopy())
	h.mu.Lock()
	h.latest = 9 // the object above has no version: as if it had 9
	h.mu.Unlock()
	v = p.Versions(context.Background())
	if len(v) != 1 || v[0].GetResourceVersion() != "9" {
		t.Fatalf("versions %v, want ConfigMap at 9", v)
	}
	var got []string
	for len(sub.ch) > 0 {
		ev := <-sub.ch
		got = append(got, fmt.Sprintf("%s@%d", strings.TrimPrefix(ev.typ.String(), "WATCH_EVENT_TYPE_"), ev.rv))
	}
	if want := []string{"ADDED@0", "BOOKMARK@9"}; !slices.Equal(got, want) {
		t.Errorf("the stream got %q, want %q", got, want)
	}

	// A kind once watched is named with no stream open: one resuming after
	// an interruption must catch up too.
	h.unsubscribe(sub)
	if v := p.Versions(context.Background()); len(v) != 1 || v[0].GetResourceVersion() != "9" {
		t.Errorf("versions with the stream closed: %v, want ConfigMap at 9", v)
	}
}

// TestAReconcileReadsItsTriggerFromASidecarsCopyWhileTheWatchLags is the
// race a child event can win in a host: the controller's handler and the
// Watch streams' hub listen to the same informer, and the reconcile the
// controller's event triggers can reach the sidecar before the hub has
// passed the change to the sidecar's copy. The hub is slowed down here, by
// a second per change; the reconcile must still list its trigger.
func TestAReconcileReadsItsTriggerFromASidecarsCopyWhileTheWatchLags(t *testing.T) {
	var slow atomic.Bool
	lag := func(schema.GroupVersionKind) {
		if slow.Load() {
			time.Sleep(time.Second) // the hub's fan-out lags behind the controller's handler
		}
	}
	testHookBeforeRecord.Store(&lag)
	t.Cleanup(func() { testHookBeforeRecord.Store(nil) })
	progress := NewCacheProgress()
	s, _, c, ns := watchServer(t, Options{Progress: progress})
	ctx := context.Background()

	// The "controller": a handler of its own on the same informer, which
	// records what it sees, as controller.Setup's wrapped handlers do, and
	// triggers a reconcile of the new ConfigMap's owner.
	informer, err := s.clients.Informers.GetInformer(ctx, object.New(configMapGVK))
	if err != nil {
		t.Fatal(err)
	}
	triggers := make(chan string, 10)
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		o := obj.(ctrlclient.Object)
		if o.GetNamespace() != ns {
			return
		}
		progress.Seen(configMapGVK, o)
		if ref := metav1.GetControllerOf(o); ref != nil {
			triggers <- ref.Name
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = informer.RemoveEventHandler(reg) })

	// The sidecar: an unchanged controller-runtime reconciler that lists
	// the owner's ConfigMaps by a Go index func, from the SDK's copy.
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	srv, err := sidecar.New(sidecar.Options{Name: "lagging", Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, ".metadata.controller", func(o ctrlclient.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	listed := make(chan []string, 10)
	cl := srv.GetClient()
	if err := sidecar.NewControllerManagedBy[*corev1.Secret](srv).Named("owners").CompleteRequests(reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
		var list corev1.ConfigMapList
		if err := cl.List(ctx, &list, ctrlclient.InNamespace(req.Namespace), ctrlclient.MatchingFields{".metadata.controller": req.Name}); err != nil {
			return ctrl.Result{}, err
		}
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		slices.Sort(names)
		listed <- names
		return ctrl.Result{}, nil
	})); err != nil {
		t.Fatal(err)
	}
	// The host's handshake, which tells the sidecar where the Cluster
	// service is.
	sc := serveSidecar(t, srv)
	if _, err := sc.Describe(ctx, &polyopv1alpha1.DescribeRequest{ProtocolVersion: sidecar.ProtocolVersion, ClusterAddress: s.Address()}); err != nil {
		t.Fatal(err)
	}
	// The host's Reconcile call: the cache versions, then the call.
	reconcileOwner := func(owner string) ([]string, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		resp, err := sc.Reconcile(ctx, &polyopv1alpha1.ReconcileRequest{
			Controller:    "owners",
			Kind:          &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"},
			Key:           &polyopv1alpha1.ObjectKey{Namespace: ns, Name: owner},
			CacheVersions: progress.Versions(ctx),
		})
		if err != nil {
			return nil, err
		}
		if msg := resp.GetError().GetMessage(); msg != "" {
			return nil, fmt.Errorf("the reconcile failed: %s", msg)
		}
		return <-listed, nil
	}

	owned := func(name string) *corev1.ConfigMap {
		yes := true
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Secret", Name: "owner", UID: types.UID("uid-owner"), Controller: &yes}}}}
	}
	if err := c.Create(ctx, owned("a")); err != nil {
		t.Fatal(err)
	}
	if got := <-triggers; got != "owner" {
		t.Fatalf("triggered %q, want owner", got)
	}
	// The first reconcile starts the copy, which lists what the hub has.
	if names, err := reconcileOwner("owner"); err != nil || !slices.Equal(names, []string{"a"}) {
		t.Fatalf("the first reconcile listed %q (error %v), want a", names, err)
	}

	// From now on the hub lags a second behind the controller.
	slow.Store(true)
	for _, name := range []string{"b", "c"} {
		if err := c.Create(ctx, owned(name)); err != nil {
			t.Fatal(err)
		}
		<-triggers
		names, err := reconcileOwner("owner")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(names, name) {
			t.Fatalf("the reconcile triggered by ConfigMap %s listed %q without it: the sidecar's copy did not have its trigger", name, names)
		}
	}
}

// BenchmarkCacheProgress measures what the barrier adds to a host: Seen, on
// every event of an owned or watched kind, and Versions, before every call to
// the sidecar, which a host without Watch streams answers at once.
func BenchmarkCacheProgress(b *testing.B) {
	p := NewCacheProgress()
	New(Clients{}, Options{Progress: p})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "123456"}}
	b.Run("seen", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Seen(configMapGVK, cm)
		}
	})
	b.Run("versions/no-streams", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			if p.Versions(ctx) != nil {
				b.Fatal("versions without streams")
			}
		}
	})
}

// serveSidecar serves srv on a loopback TCP port until the test ends and
// returns a client of it, to call it as the host does.
func serveSidecar(t *testing.T, srv *sidecar.Server) polyopv1alpha1.SidecarServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(ctx, lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serving the sidecar: %v", err)
		}
	})
	return polyopv1alpha1.NewSidecarServiceClient(conn)
}

func TestAResumedStreamSaysAtOnceHowFarItHasGot(t *testing.T) {
	h := &hub{gvk: configMapGVK, history: 10, objects: map[ctrlclient.ObjectKey]ctrlclient.Object{}, subs: map[*subscriber]struct{}{}}
	for i, ns := range []string{"mine", "other"} {
		cm := configMapIn(ns, "a", nil)
		cm.ResourceVersion = fmt.Sprint(10 + i)
		h.record(polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_ADDED, cm)
	}
	mine := func(o ctrlclient.Object) bool { return o.GetNamespace() == "mine" }
	sub := &subscriber{match: mine, ch: make(chan watchEvent, 10), overflowed: make(chan struct{})}
	initial, _, err := h.subscribe(sub, "10")
	if err != nil {
		t.Fatal(err)
	}
	// Nothing selected changed after 10, but the stream is current at 11.
	if len(initial) != 1 || initial[0].typ != polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_BOOKMARK || initial[0].rv != 11 {
		t.Errorf("a stream resumed from 10 starts with %+v, want a BOOKMARK at 11", initial)
	}
}
