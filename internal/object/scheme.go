package object

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// AddToScheme registers Object as the Go type of every kind in kinds, and
// List as the type of their lists, with the meta types (ListOptions,
// WatchEvent, Status) that listing and watching them needs.
//
// A scheme that maps one Go type to many kinds needs each object to say its
// kind: set it (New, NewList) before handing an Object to a client or a
// cache, and give the cache Transform for each kind.
func AddToScheme(s *runtime.Scheme, kinds ...schema.GroupVersionKind) {
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	seen := map[schema.GroupVersion]bool{}
	for _, gvk := range kinds {
		if gv := gvk.GroupVersion(); !seen[gv] {
			seen[gv] = true
			metav1.AddToGroupVersion(s, gv)
		}
		s.AddKnownTypeWithName(gvk, &Object{})
		s.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &List{})
	}
}

// Transform is the cache transform of the Objects of kind gvk: it sets their
// kind, which the API machinery's decoders clear, and drops their
// managedFields unless keepManagedFields.
func Transform(gvk schema.GroupVersionKind, keepManagedFields bool) toolscache.TransformFunc {
	return func(in any) (any, error) {
		if o, ok := in.(*Object); ok {
			o.SetGroupVersionKind(gvk)
			if !keepManagedFields {
				o.ManagedFields = nil
			}
		}
		return in, nil
	}
}
