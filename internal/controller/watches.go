package controller

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/object"
)

// FieldIndex is the name of the cache index on the reconciled kind that a
// field_path watch keeps: the dot-separated path itself, so that a List with
// the field selector "spec.configMapName=x" is served from the cache too.
func FieldIndex(path []string) string { return strings.Join(path, ".") }

// fieldValues is the index function of a field_path watch: the string the
// field holds, or each string of a list of strings.
func fieldValues(path []string) client.IndexerFunc {
	return func(obj client.Object) []string {
		v, found := fieldValue(obj, path)
		if !found {
			return nil
		}
		switch v := v.(type) {
		case string:
			if v != "" {
				return []string{v}
			}
		case []any:
			var out []string
			for _, item := range v {
				if s, ok := item.(string); ok && s != "" && !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
			return out
		}
		return nil
	}
}

// fieldValue reads the field at path of obj, decoding only the top-level
// field it is in.
func fieldValue(obj client.Object, path []string) (any, bool) {
	o, ok := obj.(*object.Object)
	if !ok || len(path) == 0 {
		return nil, false
	}
	var top map[string]any
	if path[0] == "metadata" {
		u, err := o.Unstructured()
		if err != nil {
			return nil, false
		}
		top = u.Object
	} else {
		v, err := o.DecodeField(path[0])
		if err != nil || v == nil {
			return nil, false
		}
		top = map[string]any{path[0]: v}
	}
	v, found, err := unstructured.NestedFieldNoCopy(top, path...)
	return v, found && err == nil
}

// target is where a controller's reconciled objects live.
type target struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	// namespaces the controller watches; empty for all.
	namespaces []string
}

// request is the reconcile request for the reconciled object name in
// namespace, or nothing when the controller does not watch there.
func (t target) request(namespace, name string) (reconcile.Request, bool) {
	if name == "" {
		return reconcile.Request{}, false
	}
	if !t.namespaced {
		return reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}, true
	}
	if namespace == "" || len(t.namespaces) > 0 && !slices.Contains(t.namespaces, namespace) {
		return reconcile.Request{}, false
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}, true
}

// nameMapper maps a watched object to the reconciled object a label or an
// annotation of it names, in the watched object's namespace.
func nameMapper(w description.Watch, t target) handler.MapFunc {
	return func(_ context.Context, obj client.Object) []reconcile.Request {
		var name string
		if w.Label != "" {
			name = obj.GetLabels()[w.Label]
		} else {
			name = obj.GetAnnotations()[w.Annotation]
		}
		if req, ok := t.request(obj.GetNamespace(), name); ok {
			return []reconcile.Request{req}
		}
		return nil
	}
}

// fieldPathMapper maps a watched object to every reconciled object whose
// field at w.FieldPath holds its name, through the field's cache index. For a
// namespaced watched kind they are looked up in its namespace; for a
// cluster-scoped one, everywhere.
func fieldPathMapper(c client.Reader, w description.Watch, t target) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := object.NewList(t.gvk)
		opts := []client.ListOption{client.MatchingFields{FieldIndex(w.FieldPath): obj.GetName()}, client.UnsafeDisableDeepCopy}
		if t.namespaced && obj.GetNamespace() != "" {
			if len(t.namespaces) > 0 && !slices.Contains(t.namespaces, obj.GetNamespace()) {
				return nil
			}
			opts = append(opts, client.InNamespace(obj.GetNamespace()))
		}
		if err := c.List(ctx, list, opts...); err != nil {
			logf.FromContext(ctx).Error(err, "listing the objects a watched object concerns", "kind", t.gvk.Kind, "field", FieldIndex(w.FieldPath), "watched", obj.GetName())
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			if req, ok := t.request(list.Items[i].GetNamespace(), list.Items[i].GetName()); ok {
				reqs = append(reqs, req)
			}
		}
		return reqs
	}
}
