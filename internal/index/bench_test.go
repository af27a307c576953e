package index

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/object"
)

// benchObjects is how many ConfigMaps the cache holds; every tenth shares a
// controller owner, so a List by the owner's name selects ten.
const benchObjects = 10_000

var benchGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// BenchmarkListByIndex measures a List by a custom index from the host's
// cache (controller-runtime's informer cache holding object.Objects, as the
// host's does) at 10k objects: the declarative index by field path and by
// CEL beside controller-runtime's IndexField with a Go function computing the
// same values, and no index. heap-MB is the heap the cache holds once synced
// (the objects and the index), sync-ms the time to list and index them all;
// ns/op is one List selecting ten objects.
func BenchmarkListByIndex(b *testing.B) {
	srv := httptest.NewServer(fakeAPIServer(b, benchObjects))
	defer srv.Close()

	path, err := FieldPath(".metadata.ownerReferences[?(@.controller==true)].name")
	if err != nil {
		b.Fatal(err)
	}
	cel, err := CEL("object.metadata.ownerReferences.filter(r, has(r.controller) && r.controller).map(r, r.name)", 0)
	if err != nil {
		b.Fatal(err)
	}
	goFunc := func(obj client.Object) []string {
		if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
			return []string{ref.Name}
		}
		return nil
	}
	for _, v := range []struct {
		name string
		fn   client.IndexerFunc
	}{
		{"none", nil},
		{"go-func", goFunc},
		{"field-path", IndexerFunc("ConfigMap", "owner", path, logr.Discard())},
		{"cel", IndexerFunc("ConfigMap", "owner", cel, logr.Discard())},
	} {
		c, heap, sync, stop := syncedCache(b, srv.URL, v.fn)
		b.Run(v.name, func(b *testing.B) {
			defer b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
			defer b.ReportMetric(float64(sync.Milliseconds()), "sync-ms")
			if v.fn == nil {
				return // no index: the memory of the objects alone
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				list := object.NewList(benchGVK)
				if err := c.List(ctx, list, client.InNamespace("bench"), client.MatchingFields{"owner": fmt.Sprintf("owner-%d", i%(benchObjects/10))},
					client.UnsafeDisableDeepCopy); err != nil {
					b.Fatal(err)
				}
				if n := len(list.Items); n != 10 {
					b.Fatalf("listed %d objects, want 10", n)
				}
			}
		})
		stop()
	}
}

// BenchmarkIndexValues measures computing one object's index values, which
// the cache does for every add and update: the declarative index by field
// path and by CEL beside a Go function computing the same value.
func BenchmarkIndexValues(b *testing.B) {
	obj := object.New(benchGVK)
	raw := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"bench","ownerReferences":[` +
		`{"apiVersion":"bench.polyop.dev/v1","kind":"Widget","name":"owner-1","uid":"u","controller":true}]},"data":{"a":"x"}}`
	if err := obj.UnmarshalJSON([]byte(raw)); err != nil {
		b.Fatal(err)
	}
	path, err := FieldPath(".metadata.ownerReferences[?(@.controller==true)].name")
	if err != nil {
		b.Fatal(err)
	}
	cel, err := CEL("object.metadata.ownerReferences.filter(r, has(r.controller) && r.controller).map(r, r.name)", 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name string
		fn   client.IndexerFunc
	}{
		{"go-func", func(obj client.Object) []string { return []string{metav1.GetControllerOfNoCopy(obj).Name} }},
		{"field-path", IndexerFunc("ConfigMap", "owner", path, logr.Discard())},
		{"cel", IndexerFunc("ConfigMap", "owner", cel, logr.Discard())},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if got := v.fn(obj); len(got) != 1 || got[0] != "owner-1" {
					b.Fatalf("values %q", got)
				}
			}
		})
	}
}

// syncedCache starts a cache of ConfigMaps from the API server at url,
// indexed by fn under "owner" when fn is set, and waits for it to sync. It
// returns the heap the cache holds and the time it took to sync.
func syncedCache(b *testing.B, url string, fn client.IndexerFunc) (cache.Cache, uint64, time.Duration, func()) {
	b.Helper()
	scheme := apiruntime.NewScheme()
	object.AddToScheme(scheme, benchGVK)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(benchGVK, meta.RESTScopeNamespace)
	cfg := &rest.Config{Host: url}
	cfg.ContentType = "application/json"
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	before := heapInUse()
	c, err := cache.New(cfg, cache.Options{
		HTTPClient: httpClient, Scheme: scheme, Mapper: mapper,
		ByObject: map[client.Object]cache.ByObject{object.New(benchGVK): {Transform: object.Transform(benchGVK, false)}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if fn != nil {
		if err := c.IndexField(context.Background(), object.New(benchGVK), "owner", fn); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	if _, err := c.GetInformer(ctx, object.New(benchGVK)); err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("the cache did not sync")
	}
	sync := time.Since(start)
	return c, heapInUse() - before, sync, cancel
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// fakeAPIServer answers a List (or a watch list) of n ConfigMaps in namespace
// "bench", each with data and a controller owner owner-<i/10>, and a watch
// that stays open without events.
func fakeAPIServer(b *testing.B, n int) http.Handler {
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{
				"name": fmt.Sprintf("cm-%d", i), "namespace": "bench", "uid": fmt.Sprintf("uid-%d", i), "resourceVersion": "1",
				"labels": map[string]any{"app": "bench"},
				"ownerReferences": []any{map[string]any{
					"apiVersion": "bench.polyop.dev/v1", "kind": "Widget", "name": fmt.Sprintf("owner-%d", i/10), "uid": fmt.Sprintf("owner-uid-%d", i/10),
					"controller": true, "blockOwnerDeletion": true,
				}},
			},
			"data": map[string]any{"a": fmt.Sprintf("%0128d", i), "b": fmt.Sprintf("%0128d", i)},
		}
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMapList", "metadata": map[string]any{"resourceVersion": "1"}, "items": items})
	if err != nil {
		b.Fatal(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		w.Header().Set("Content-Type", "application/json")
		if q.Get("watch") != "true" {
			_, _ = w.Write(list)
			return
		}
		w.WriteHeader(http.StatusOK)
		if q.Get("sendInitialEvents") == "true" {
			enc := json.NewEncoder(w)
			for _, item := range items {
				_ = enc.Encode(map[string]any{"type": "ADDED", "object": item})
			}
			_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"resourceVersion": "1", "annotations": map[string]any{metav1.InitialEventsAnnotationKey: "true"}},
			}})
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		<-r.Context().Done()
	})
}
