package host

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper counts the RESTMapping calls that reach it.
type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.calls++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// The fixed mappings answer what the inner mapper answers, for the cached
// kinds from the table and for every other question from the inner mapper.
func TestFixedMappingsAnswerAsTheInnerMapper(t *testing.T) {
	t.Parallel()
	cluster := schema.GroupVersionKind{Group: "e2e.polyop.dev", Version: "v1", Kind: "ClusterWidget"}
	other := schema.GroupVersionKind{Group: "e2e.polyop.dev", Version: "v1", Kind: "Gadget"}
	base := meta.NewDefaultRESTMapper([]schema.GroupVersion{widget.GroupVersion()})
	base.Add(widget, meta.RESTScopeNamespace)
	base.Add(cluster, meta.RESTScopeRoot)
	base.Add(other, meta.RESTScopeNamespace)
	inner := &countingMapper{RESTMapper: base}
	unknown := schema.GroupVersionKind{Group: "nowhere.dev", Version: "v1", Kind: "Missing"}
	m := withFixedMappings(inner, []schema.GroupVersionKind{widget, cluster, unknown})

	inner.calls = 0
	for range 3 {
		for _, gvk := range []schema.GroupVersionKind{widget, cluster} {
			got, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
			want, wantErr := base.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil || wantErr != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("%s: got %+v, %v; want %+v, %v", gvk, got, err, want, wantErr)
			}
			got.Resource.Resource = "changed"
		}
	}
	if inner.calls != 0 {
		t.Errorf("the inner mapper was asked %d times for the cached kinds, want 0", inner.calls)
	}

	// Everything else is the inner mapper's.
	for _, q := range []struct {
		gk       schema.GroupKind
		versions []string
	}{{other.GroupKind(), []string{"v1"}}, {widget.GroupKind(), nil}, {widget.GroupKind(), []string{"v2"}}, {unknown.GroupKind(), []string{"v1"}}} {
		got, err := m.RESTMapping(q.gk, q.versions...)
		want, wantErr := base.RESTMapping(q.gk, q.versions...)
		if !reflect.DeepEqual(got, want) || (err == nil) != (wantErr == nil) {
			t.Errorf("%s %v: got %+v, %v; want %+v, %v", q.gk, q.versions, got, err, want, wantErr)
		}
	}
	if inner.calls != 4 {
		t.Errorf("the inner mapper was asked %d times for other kinds, want 4", inner.calls)
	}
	if gvk, err := m.KindFor(widget.GroupVersion().WithResource("widgets")); err != nil || gvk != widget {
		t.Errorf("KindFor: %v, %v", gvk, err)
	}
}
