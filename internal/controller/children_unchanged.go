package controller

import (
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/utils/ptr"

	"github.com/polyop/polyop/internal/object"
)

// unchanged reports whether a child whose applied configuration is the one
// last applied, at resourceVersion applied, needs no apply: the cache holds
// the version that apply wrote, or an older one (the event of the apply is
// on its way and brings another reconcile), or the observed child, changed
// since, still holds every field the configuration sets.
func unchanged(observed *object.Object, desired desiredChild, applied string) bool {
	if observed == nil {
		return false
	}
	if cmp, err := resourceversion.CompareResourceVersion(observed.GetResourceVersion(), applied); err == nil && cmp <= 0 {
		return true
	}
	u, err := observed.Unstructured()
	if err != nil {
		return false
	}
	d, err := desired.object()
	if err != nil {
		return false
	}
	return holds(u, d)
}

// holds reports whether observed still holds every field desired sets, owner
// references aside (they are compared by UID): if so, applying desired again
// would change nothing the controller manages. A list must match element by
// element: a list another manager added to is applied again, which is
// harmless.
func holds(observed, desired *unstructured.Unstructured) bool {
	for _, want := range desired.GetOwnerReferences() {
		found := false
		for _, got := range observed.GetOwnerReferences() {
			if got.UID == want.UID && ptr.Deref(got.Controller, false) == ptr.Deref(want.Controller, false) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	// desired without its owner references: two shallow copies, not a deep
	// one, as contains only reads.
	want := desired.Object
	if metadata, ok := want["metadata"].(map[string]any); ok {
		if _, has := metadata["ownerReferences"]; has {
			metadata = maps.Clone(metadata)
			delete(metadata, "ownerReferences")
			want = maps.Clone(want)
			want["metadata"] = metadata
		}
	}
	return contains(observed.Object, want)
}

// contains reports whether have holds every field of want with the same
// value.
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, present := h[k]
			if !present {
				if empty(wv) {
					continue // the API server drops empty fields
				}
				return false
			}
			if !contains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return have == nil
	}
	if wf, ok := number(want); ok {
		hf, ok := number(have)
		return ok && hf == wf
	}
	return have == want
}

// empty reports whether v is null, or an empty object or list.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// number reads a JSON number decoded as int64 or float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}
