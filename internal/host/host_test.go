package host

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/object"
)

var widget = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

func describe(cs ...description.Controller) *description.Description {
	for i := range cs {
		if cs[i].LabelSelector == nil {
			cs[i].LabelSelector = labels.Everything()
		}
	}
	return &description.Description{Name: "s", Controllers: cs}
}

// resolved resolves desc with a mapper that serves Widgets in namespaces.
func resolved(t *testing.T, desc *description.Description, opts Options) *description.Resolved {
	t.Helper()
	res, err := resolve(widgetMapper(), desc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// resolve plans opts and resolves desc by the plan, as Run does.
func resolve(mapper meta.RESTMapper, desc *description.Description, opts Options) (*description.Resolved, error) {
	p, err := newPlan(opts)
	if err != nil {
		return nil, err
	}
	return p.resolve(mapper, desc)
}

func widgetMapper() meta.RESTMapper {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{widget.GroupVersion()})
	mapper.Add(widget, meta.RESTScopeNamespace)
	return mapper
}

func TestResolveRejectsABadSelector(t *testing.T) {
	t.Parallel()
	opts := NewOptions()
	opts.LabelSelector = "a in ("
	_, err := resolve(widgetMapper(), describe(description.Controller{Name: "w", GVK: widget}), opts)
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
		o := cacheOptions(resolved(t, desc, NewOptions()), false)
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
		o := cacheOptions(resolved(t, describe(description.Controller{Name: "w", GVK: widget}), NewOptions()), true)
		for _, by := range o.ByObject {
			if managedFieldsAfter(t, by) != 1 {
				t.Error("managedFields are stripped")
			}
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

// TestAHostWithoutAWebhookServerDoesNotResolveWebhookKinds: with
// --webhook-port 0 nothing serves the sidecar's webhooks, so their kinds need
// not be served either, as before the description was resolved in one place.
func TestAHostWithoutAWebhookServerDoesNotResolveWebhookKinds(t *testing.T) {
	t.Parallel()
	gadget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}
	desc := &description.Description{Name: "s", Webhooks: []description.Webhook{{GVK: gadget, Validate: true}}}
	opts := NewOptions()
	if _, err := resolve(widgetMapper(), desc, opts); err == nil || !strings.Contains(err.Error(), "Gadget.example.com/v1, which the API server does not serve") {
		t.Errorf("with the webhook server on: %v, want the unserved kind named", err)
	}
	opts.Webhook.Port = 0
	if _, err := resolve(widgetMapper(), desc, opts); err != nil {
		t.Errorf("with the webhook server off: %v", err)
	}
}
