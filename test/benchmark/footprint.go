package benchmark

import (
	"encoding/json"
	"fmt"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsjson "sigs.k8s.io/json"

	"github.com/polyop/polyop/internal/object"
	benchv1alpha1 "github.com/polyop/polyop/test/benchmark/api/v1alpha1"
	"github.com/polyop/polyop/test/benchmark/widget"
)

// footprintObjects is how many objects each footprint is measured over.
const footprintObjects = 10000

// Footprint is the memory one object takes in a cache, decoded from the API
// server's JSON (managedFields stripped) into each representation.
type Footprint struct {
	// Kind is Widget or ConfigMap.
	Kind string
	// JSON is the size of the object's JSON.
	JSON int
	// Typed is the bytes per object decoded into its Go type, as the
	// baseline caches it; Object into object.Object, as the host caches it;
	// Unstructured into map[string]any, as unstructured.Unstructured holds
	// it (for comparison: what a cache of unstructured objects would take).
	Typed, Object, Unstructured float64
}

// footprints measures the Widget and the ConfigMap of a run, as the caches
// of the baseline and the host hold them.
func footprints(opts Options) []Footprint {
	w := newWidget("bench-go-unix-10000-abcde", 0, opts)
	w.APIVersion, w.Kind = benchv1alpha1.GroupVersion.String(), "Widget"
	w.UID, w.ResourceVersion, w.Generation = "0b7c5a4e-3c1f-4f57-9d5e-1f2a3b4c5d6e", "123456", 1
	w.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	widget.MarkReady(w)
	cm := widget.ConfigMap(w)
	cm.UID, cm.ResourceVersion, cm.CreationTimestamp = "1b7c5a4e-3c1f-4f57-9d5e-1f2a3b4c5d6e", "123457", w.CreationTimestamp
	cm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(w, benchv1alpha1.GroupVersion.WithKind("Widget"))}

	return []Footprint{
		footprint("Widget", w, func() any { return &benchv1alpha1.Widget{} }),
		footprint("ConfigMap", cm, func() any { return &corev1.ConfigMap{} }),
	}
}

func footprint(kind string, obj any, typed func() any) Footprint {
	data, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("encoding a %s: %v", kind, err))
	}
	f := Footprint{Kind: kind, JSON: len(data)}
	f.Typed = retained(func() any {
		o := typed()
		_ = sigsjson.UnmarshalCaseSensitivePreserveInts(data, o)
		return o
	})
	f.Object = retained(func() any {
		o := &object.Object{}
		_ = sigsjson.UnmarshalCaseSensitivePreserveInts(data, o)
		return o
	})
	f.Unstructured = retained(func() any {
		u := &unstructured.Unstructured{}
		_ = u.UnmarshalJSON(data)
		return u
	})
	return f
}

// retained is the heap that footprintObjects results of decode keep alive,
// per object.
func retained(decode func() any) float64 {
	keep := make([]any, footprintObjects)
	before := liveHeap()
	for i := range keep {
		keep[i] = decode()
	}
	after := liveHeap()
	runtime.KeepAlive(keep)
	return float64(after-before) / footprintObjects
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
