package host

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/object"
)

var (
	widget  = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	cluster = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "ClusterThing"}
)

func describe(cs ...description.Controller) *description.Description {
	for i := range cs {
		if cs[i].LabelSelector == nil {
			cs[i].LabelSelector = labels.Everything()
		}
	}
	return &description.Description{Name: "s", Controllers: cs}
}

func TestNarrowAppliesHostFlagsToNamespacedKindsOnly(t *testing.T) {
	t.Parallel()
	desc := describe(
		description.Controller{Name: "w", GVK: widget},
		description.Controller{Name: "c", GVK: cluster},
	)
	namespaced := map[schema.GroupVersionKind]bool{widget: true, cluster: false}
	opts := NewOptions()
	opts.Namespaces = []string{"team-a"}
	opts.LabelSelector = "shard=1"
	if err := narrow(desc, namespaced, opts); err != nil {
		t.Fatal(err)
	}
	if got := desc.Controllers[0].Namespaces; len(got) != 1 || got[0] != "team-a" {
		t.Errorf("namespaced kind watches %v, want [team-a]", got)
	}
	if got := desc.Controllers[1].Namespaces; len(got) != 0 {
		t.Errorf("cluster-scoped kind watches namespaces %v, want none", got)
	}
	for _, c := range desc.Controllers {
		if c.LabelSelector.String() != "shard=1" {
			t.Errorf("controller %s selector = %q, want shard=1", c.Name, c.LabelSelector)
		}
	}
}

func TestNarrowRejectsABadSelector(t *testing.T) {
	t.Parallel()
	opts := NewOptions()
	opts.LabelSelector = "a in ("
	err := narrow(describe(description.Controller{Name: "w", GVK: widget}), map[schema.GroupVersionKind]bool{widget: true}, opts)
	if err == nil || !strings.Contains(err.Error(), "--label-selector") {
		t.Errorf("error = %v, want one naming --label-selector", err)
	}
}

func TestCacheOptions(t *testing.T) {
	t.Parallel()
	sel, _ := labels.Parse("app=web")
	t.Run("each kind gets its namespaces and selector, and managedFields are stripped", func(t *testing.T) {
		t.Parallel()
		desc := describe(description.Controller{Name: "w", GVK: widget, Namespaces: []string{"a", "b"}, LabelSelector: sel})
		o, err := cacheOptions(desc, map[schema.GroupVersionKind]bool{widget: true}, NewOptions())
		if err != nil {
			t.Fatal(err)
		}
		if len(o.ByObject) != 1 {
			t.Fatalf("ByObject has %d entries, want 1", len(o.ByObject))
		}
		for obj, by := range o.ByObject {
			if obj.GetObjectKind().GroupVersionKind() != widget {
				t.Errorf("ByObject key is %v", obj.GetObjectKind().GroupVersionKind())
			}
			if len(by.Namespaces) != 2 || by.Label.String() != "app=web" {
				t.Errorf("ByObject = %+v", by)
			}
			if managedFieldsAfter(t, by) != 0 {
				t.Error("the cache keeps managedFields")
			}
		}
	})
	t.Run("with --keep-managed-fields nothing is stripped", func(t *testing.T) {
		t.Parallel()
		opts := NewOptions()
		opts.KeepManagedFields = true
		o, err := cacheOptions(describe(description.Controller{Name: "w", GVK: widget}), map[schema.GroupVersionKind]bool{widget: true}, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, by := range o.ByObject {
			if managedFieldsAfter(t, by) != 1 {
				t.Error("managedFields are stripped")
			}
		}
	})
	t.Run("two controllers of one kind must agree on what to cache", func(t *testing.T) {
		t.Parallel()
		desc := describe(
			description.Controller{Name: "one", GVK: widget, Namespaces: []string{"a"}},
			description.Controller{Name: "two", GVK: widget, Namespaces: []string{"b"}},
		)
		_, err := cacheOptions(desc, map[schema.GroupVersionKind]bool{widget: true}, NewOptions())
		if err == nil || !strings.Contains(err.Error(), `controllers "one" and "two"`) {
			t.Errorf("error = %v", err)
		}
	})
}

func TestStringListFlag(t *testing.T) {
	t.Parallel()
	var l stringList
	for _, v := range []string{"a,b", "c"} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if l.String() != "a,b,c" {
		t.Errorf("list = %q", l.String())
	}
	if err := l.Set("a,,b"); err == nil {
		t.Error("an empty value was accepted")
	}
}

// managedFieldsAfter is how many managedFields entries an object keeps once
// through by's transform, which must also give it its kind.
func managedFieldsAfter(t *testing.T, by cache.ByObject) int {
	t.Helper()
	if by.Transform == nil {
		t.Fatal("the cache view has no transform")
	}
	in := &object.Object{}
	in.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	out, err := by.Transform(in)
	if err != nil {
		t.Fatal(err)
	}
	o := out.(*object.Object)
	if o.GroupVersionKind() != widget {
		t.Errorf("the transform set the kind %v, want %v", o.GroupVersionKind(), widget)
	}
	return len(o.ManagedFields)
}
