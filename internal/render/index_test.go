package render

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/index"
)

// polyop render answers a List by one of the sidecar's declared indexes, or
// by the host's owner-UID index, as the host's cache does, so that a
// reconciler that lists by an index renders as it runs.
func TestRenderListsByTheSidecarsIndexes(t *testing.T) {
	t.Parallel()
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	configMap := func(name, owner, uid string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name, "namespace": "default"}}}
		u.SetGroupVersionKind(cm)
		if owner != "" {
			u.Object["metadata"].(map[string]any)["ownerReferences"] = []any{
				map[string]any{"apiVersion": "v1", "kind": "Secret", "name": owner, "uid": uid, "controller": true},
			}
		}
		return u
	}
	byOwner, err := index.FieldPath(".metadata.ownerReferences[?(@.kind==\"Secret\")].name")
	if err != nil {
		t.Fatal(err)
	}
	s := &objectStore{}
	s.set([]*unstructured.Unstructured{configMap("a", "p", "u-p"), configMap("b", "q", "u-q"), configMap("c", "p", "u-p"), configMap("d", "", "")})
	s.setIndexes([]description.Index{{GVK: cm, Name: "owner", Expression: byOwner}})

	list := func(opts ...client.ListOption) ([]string, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(cm.GroupVersion().WithKind("ConfigMapList"))
		err := s.List(context.Background(), l, opts...)
		var names []string
		for _, item := range l.Items {
			names = append(names, item.GetName())
		}
		return names, err
	}
	for _, tc := range []struct {
		name   string
		fields client.MatchingFields
		want   string
	}{
		{"a declared index", client.MatchingFields{"owner": "p"}, "a,c"},
		{"the owner-UID index", client.MatchingFields{index.OwnerUID: "u-q"}, "b"},
		{"a value nothing holds", client.MatchingFields{"owner": "z"}, ""},
		{"metadata.name, as before", client.MatchingFields{"metadata.name": "d"}, "d"},
	} {
		got, err := list(client.InNamespace("default"), tc.fields)
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("%s: listed %v (%v), want %s", tc.name, got, err, tc.want)
		}
	}
	if _, err := list(client.MatchingFields{"data.x": "1"}); err == nil || !strings.Contains(err.Error(), "indexes of ConfigMap (owner) only, not data.x") {
		t.Errorf("a List by a field that is no index gave %v, want a refusal naming the indexes", err)
	}
}
