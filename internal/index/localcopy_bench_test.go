package index_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/cluster"
	"github.com/polyop/polyop/internal/index"
	polyopclient "github.com/polyop/polyop/sdk/go/client"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// controllerOf is the Go index func a kubebuilder operator writes: the name
// of the object's controller.
func controllerOf(obj client.Object) []string {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return []string{ref.Name}
	}
	return nil
}

// BenchmarkLocalCopy measures the Go SDK's local copy behind
// GetFieldIndexer().IndexField at 10k objects beside controller-runtime's own
// cache with the same Go index func, in the same run.
//
// controller-runtime is what a plain manager holds for the reconciler: an
// informer cache of typed ConfigMaps with IndexField, listed with its default
// deep copy. local-copy is what the sidecar holds for the same reconciler:
// the Go SDK's Client, whose copy is filled through a real Watch stream from
// the host's own Cluster service, served over a unix socket from the host's
// informer cache (BenchmarkListByIndex's, unindexed). heap-MB is the heap the
// cache holds once synced, for local-copy the sidecar's side alone (the
// host's cache and its Watch bookkeeping are there before it is measured);
// sync-ms the time until the first List by the index is answered; ns/op one
// List selecting ten objects by the index (client.MatchingFields). ratio's
// x-heap and x-list are local-copy's heap and List latency over
// controller-runtime's, the latencies from Lists of the two in turn.
func BenchmarkLocalCopy(b *testing.B) {
	srv := httptest.NewServer(index.FakeAPIServer(b, index.BenchObjects))
	defer srv.Close()
	ctx := context.Background()
	list := func(c client.Reader, i int) {
		var list corev1.ConfigMapList
		if err := c.List(ctx, &list, client.InNamespace("bench"), client.MatchingFields{"owner": fmt.Sprintf("owner-%d", i%(index.BenchObjects/10))}); err != nil {
			b.Fatal(err)
		}
		if n := len(list.Items); n != 10 {
			b.Fatalf("listed %d objects, want 10", n)
		}
	}

	crCache, crHeap, crSync, stopCR := typedCache(b, srv.URL)
	defer stopCR()
	sdk, heap, sync, stop := localCopy(b, srv.URL)
	defer stop()
	for _, v := range []struct {
		name string
		c    client.Reader
		heap uint64
		sync time.Duration
	}{
		{"controller-runtime", crCache, crHeap, crSync},
		{"local-copy", sdk, heap, sync},
	} {
		b.Run(v.name, func(b *testing.B) {
			defer b.ReportMetric(float64(v.heap)/(1<<20), "heap-MB")
			defer b.ReportMetric(float64(v.sync.Milliseconds()), "sync-ms")
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				list(v.c, i)
			}
		})
	}
	// The ratios, from Lists of the two in turn, so that a busy machine
	// slows both alike.
	b.Run("ratio", func(b *testing.B) {
		var cr, local time.Duration
		for i := range b.N {
			start := time.Now()
			list(crCache, i)
			mid := time.Now()
			list(sdk, i)
			cr, local = cr+mid.Sub(start), local+time.Since(mid)
		}
		b.ReportMetric(float64(heap)/float64(crHeap), "x-heap")
		b.ReportMetric(float64(local)/float64(cr), "x-list")
	})
}

// typedCache is a manager's cache of typed ConfigMaps from the API server at
// url, indexed by controllerOf under "owner", synced. It returns the heap the
// cache holds and the time it took to sync.
func typedCache(b *testing.B, url string) (cache.Cache, uint64, time.Duration, func()) {
	b.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(index.BenchGVK, meta.RESTScopeNamespace)
	cfg := &rest.Config{Host: url}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	before := index.HeapInUse()
	c, err := cache.New(cfg, cache.Options{HTTPClient: httpClient, Scheme: clientgoscheme.Scheme, Mapper: mapper})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.IndexField(context.Background(), &corev1.ConfigMap{}, "owner", controllerOf); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("the cache did not sync")
	}
	sync := time.Since(start)
	return c, index.HeapInUse() - before, sync, cancel
}

// localCopy serves the host's Cluster service from the host's cache of the
// ConfigMaps at url, and returns a Go SDK Client indexing them by
// controllerOf under "owner" whose copy has synced, with the heap the copy
// holds and the time until the first List by the index was answered.
func localCopy(b *testing.B, url string) (*polyopclient.Client, uint64, time.Duration, func()) {
	b.Helper()
	hostCache, _, _, stopCache := index.SyncedCache(b, url, nil)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(index.BenchGVK, meta.RESTScopeNamespace)
	srv := cluster.New(cluster.Clients{Cache: hostCache, Mapper: mapper, Informers: hostCache},
		cluster.Options{CachedKinds: map[schema.GroupVersionKind][]string{index.BenchGVK: nil}})
	dir, err := os.MkdirTemp("", "bench-") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		b.Fatal(err)
	}
	address := "unix://" + filepath.Join(dir, "cluster.sock")
	if err := srv.Listen(address); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Start(ctx) }()
	stopHost := func() {
		cancel()
		<-served
		stopCache()
		_ = os.RemoveAll(dir)
	}

	// One Watch first, so that the host's bookkeeping of the kind's Watches
	// is in place before the sidecar's side is measured.
	conn, err := grpc.NewClient(srv.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	stream, err := polyopv1alpha1.NewClusterServiceClient(conn).Watch(wctx, &polyopv1alpha1.WatchRequest{
		Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			b.Fatal(err)
		}
		if resp.GetType() == polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_INITIAL_LIST_DONE {
			break
		}
	}
	wcancel()
	_ = conn.Close()

	before := index.HeapInUse()
	start := time.Now()
	sdk, err := polyopclient.New(polyopclient.Options{Address: srv.Address(), Scheme: clientgoscheme.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	if err := sdk.IndexField(ctx, &corev1.ConfigMap{}, "owner", controllerOf); err != nil {
		b.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(ctx, time.Minute)
	defer lcancel()
	var list corev1.ConfigMapList
	if err := sdk.List(lctx, &list, client.InNamespace("bench"), client.MatchingFields{"owner": "owner-0"}); err != nil {
		b.Fatal(err)
	}
	sync := time.Since(start)
	heap := index.HeapInUse() - before
	return sdk, heap, sync, func() {
		_ = sdk.Close()
		stopHost()
	}
}
