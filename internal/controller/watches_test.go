package controller

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

var widgetGVK = schema.GroupVersionKind{Group: "e2e.polyop.dev", Version: "v1", Kind: "Widget"}

func TestFieldValues(t *testing.T) {
	t.Parallel()
	path := []string{"spec", "configMapName"}
	for name, tc := range map[string]struct {
		spec map[string]any
		want []string
	}{
		"if the field holds a name, then that name":               {spec: map[string]any{"configMapName": "c"}, want: []string{"c"}},
		"if the field holds names, then each, once":               {spec: map[string]any{"configMapName": []any{"a", "b", "a", 3, ""}}, want: []string{"a", "b"}},
		"if the field is empty, then nothing":                     {spec: map[string]any{"configMapName": ""}},
		"if the field is missing, then nothing":                   {spec: map[string]any{}},
		"if the field holds something else, then nothing":         {spec: map[string]any{"configMapName": map[string]any{"a": "b"}}},
		"if a segment of the path is not an object, then nothing": {spec: nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			u := &unstructured.Unstructured{Object: map[string]any{"spec": tc.spec}}
			if tc.spec == nil {
				u.Object["spec"] = "a string"
			}
			u.SetGroupVersionKind(widgetGVK)
			u.SetName("w")
			if got := fieldValues(path)(toObject(t, u)); !slices.Equal(got, tc.want) {
				t.Errorf("fieldValues = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNameMapper(t *testing.T) {
	t.Parallel()
	watched := func(namespace string, labels, annotations map[string]string) client.Object {
		u := &unstructured.Unstructured{}
		u.SetNamespace(namespace)
		u.SetName("watched")
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		return u
	}
	byLabel := description.Watch{Label: "example.com/owner"}
	byAnnotation := description.Watch{Annotation: "example.com/owner"}
	namespaced := target{gvk: widgetGVK, namespaced: true}
	for name, tc := range map[string]struct {
		watch  description.Watch
		target target
		obj    client.Object
		want   []reconcile.Request
	}{
		"if the label names an object, then it, in the watched object's namespace": {
			watch: byLabel, target: namespaced, obj: watched("ns", map[string]string{"example.com/owner": "w"}, nil),
			want: []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "w"}}},
		},
		"if the annotation names an object, then it": {
			watch: byAnnotation, target: namespaced, obj: watched("ns", nil, map[string]string{"example.com/owner": "w"}),
			want: []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "w"}}},
		},
		"if the label is missing, then nothing": {
			watch: byLabel, target: namespaced, obj: watched("ns", nil, map[string]string{"example.com/owner": "w"}),
		},
		"if the controller does not watch the namespace, then nothing": {
			watch: byLabel, target: target{gvk: widgetGVK, namespaced: true, namespaces: []string{"a"}}, obj: watched("ns", map[string]string{"example.com/owner": "w"}, nil),
		},
		"if the reconciled kind is cluster-scoped, then a cluster-scoped key": {
			watch: byLabel, target: target{gvk: widgetGVK}, obj: watched("ns", map[string]string{"example.com/owner": "w"}, nil),
			want: []reconcile.Request{{NamespacedName: client.ObjectKey{Name: "w"}}},
		},
		"if the watched object has no namespace but the reconciled kind has, then nothing": {
			watch: byLabel, target: namespaced, obj: watched("", map[string]string{"example.com/owner": "w"}, nil),
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := nameMapper(tc.watch, tc.target)(context.Background(), tc.obj); !slices.Equal(got, tc.want) {
				t.Errorf("requests %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFieldPathMapperUsesTheIndex(t *testing.T) {
	t.Parallel()
	w := description.Watch{GVK: configMapGVK, FieldPath: []string{"spec", "configMapName"}}
	widget := func(namespace, name, cm string) client.Object {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"configMapName": cm}}}
		u.SetGroupVersionKind(widgetGVK)
		u.SetNamespace(namespace)
		u.SetName(name)
		return toObject(t, u)
	}
	scheme := runtime.NewScheme()
	object.AddToScheme(scheme, widgetGVK)
	c := fake.NewClientBuilder().
		WithScheme(scheme).
		WithObjects(widget("ns", "a", "settings"), widget("ns", "b", "settings"), widget("ns", "c", "other"), widget("elsewhere", "d", "settings")).
		WithIndex(object.New(widgetGVK), FieldIndex(w.FieldPath), fieldValues(w.FieldPath)).
		Build()
	cm := &unstructured.Unstructured{}
	cm.SetGroupVersionKind(configMapGVK)
	cm.SetNamespace("ns")
	cm.SetName("settings")

	got := fieldPathMapper(c, w, target{gvk: widgetGVK, namespaced: true})(context.Background(), cm)
	want := []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "a"}}, {NamespacedName: client.ObjectKey{Namespace: "ns", Name: "b"}}}
	slices.SortFunc(got, func(x, y reconcile.Request) int { return strings.Compare(x.Name, y.Name) })
	if !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	if got := fieldPathMapper(c, w, target{gvk: widgetGVK, namespaced: true, namespaces: []string{"elsewhere"}})(context.Background(), cm); len(got) != 0 {
		t.Errorf("a ConfigMap in a namespace the controller does not watch enqueued %v", got)
	}
}

func TestFiltersLetAFinalizingControllerSeeItsDeletion(t *testing.T) {
	t.Parallel()
	gen := polyopv1alpha1.UpdateFilter_UPDATE_FILTER_GENERATION_CHANGED
	del := polyopv1alpha1.UpdateFilter_UPDATE_FILTER_DELETION_CHANGED
	for name, tc := range map[string]struct {
		c    description.Controller
		want []polyopv1alpha1.UpdateFilter
	}{
		"if there is no finalizer, the filters are as declared": {c: description.Controller{UpdateFilters: []polyopv1alpha1.UpdateFilter{gen}}, want: []polyopv1alpha1.UpdateFilter{gen}},
		"if there are no filters, every update passes already":  {c: description.Controller{Finalizer: "x.io/f"}},
		"if there is a finalizer, deletion changes pass too":    {c: description.Controller{Finalizer: "x.io/f", UpdateFilters: []polyopv1alpha1.UpdateFilter{gen}}, want: []polyopv1alpha1.UpdateFilter{gen, del}},
		"if deletion changes pass already, nothing is added":    {c: description.Controller{Finalizer: "x.io/f", UpdateFilters: []polyopv1alpha1.UpdateFilter{del}}, want: []polyopv1alpha1.UpdateFilter{del}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := filters(tc.c); !slices.Equal(got, tc.want) {
				t.Errorf("filters = %v, want %v", got, tc.want)
			}
		})
	}
}

// toObject converts an unstructured object to the object.Object the host's
// cache would hold.
func toObject(t *testing.T, u *unstructured.Unstructured) *object.Object {
	t.Helper()
	raw, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	o := object.New(u.GroupVersionKind())
	if err := json.Unmarshal(raw, o); err != nil {
		t.Fatal(err)
	}
	return o
}
