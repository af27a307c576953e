package description

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

var pb = &polyopv1alpha1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}

func TestNewDescriptionCompilesIndexes(t *testing.T) {
	t.Parallel()
	resp := validResponse()
	resp.Indexes = []*polyopv1alpha1.IndexDescription{
		{Kind: pb, Name: ".metadata.controller", Value: &polyopv1alpha1.IndexDescription_FieldPath{FieldPath: ".metadata.ownerReferences[?(@.controller==true)].name"}},
		{Kind: pb, Name: "owner", Value: &polyopv1alpha1.IndexDescription_Cel{Cel: "object.metadata.ownerReferences.map(r, r.name)"}},
	}
	d, err := NewDescription(resp)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Indexes) != 2 || d.Indexes[0].Expression == nil || d.Indexes[1].Expression == nil {
		t.Fatalf("indexes %+v, want both compiled", d.Indexes)
	}
}

func TestNewDescriptionRefusesABadIndexNamingIt(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		ix   *polyopv1alpha1.IndexDescription
		says []string
	}{
		"if the CEL expression does not compile, then the index, the kind and CEL's error": {
			ix:   &polyopv1alpha1.IndexDescription{Kind: pb, Name: "by-owner", Value: &polyopv1alpha1.IndexDescription_Cel{Cel: "object.metadata.("}},
			says: []string{"indexes[0].cel", `index "by-owner" on Job.batch/v1`, "does not compile", "Syntax error"},
		},
		"if the CEL expression returns no string, then what it returns": {
			ix:   &polyopv1alpha1.IndexDescription{Kind: pb, Name: "by-size", Value: &polyopv1alpha1.IndexDescription_Cel{Cel: "size(object.metadata.name)"}},
			says: []string{`index "by-size" on Job.batch/v1`, "returns int"},
		},
		"if the field path does not parse, then the index and the path": {
			ix:   &polyopv1alpha1.IndexDescription{Kind: pb, Name: "x", Value: &polyopv1alpha1.IndexDescription_FieldPath{FieldPath: ".spec..x"}},
			says: []string{"indexes[0].field_path", `index "x" on Job.batch/v1`, `".spec..x"`},
		},
		"if neither is set": {
			ix:   &polyopv1alpha1.IndexDescription{Kind: pb, Name: "x"},
			says: []string{"set field_path or cel"},
		},
		"if the name is the owner-UID index": {
			ix:   &polyopv1alpha1.IndexDescription{Kind: pb, Name: ".metadata.controllerUID", Value: &polyopv1alpha1.IndexDescription_FieldPath{FieldPath: ".a"}},
			says: []string{"the host keeps this index itself"},
		},
		"if the name cannot be a field selector's key": {
			ix:   &polyopv1alpha1.IndexDescription{Kind: pb, Name: "a=b", Value: &polyopv1alpha1.IndexDescription_FieldPath{FieldPath: ".a"}},
			says: []string{"may not hold '='"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resp := validResponse()
			resp.Indexes = []*polyopv1alpha1.IndexDescription{tc.ix}
			_, err := NewDescription(resp)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range tc.says {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%v\ndoes not say %s", err, want)
				}
			}
		})
	}
}

func TestResolveCachesDeclaredKindsInTheHostsNamespaces(t *testing.T) {
	t.Parallel()
	desc := describe(Controller{Name: "a", GVK: widgetKind, Namespaces: []string{"team-a", "team-b"}})
	desc.CachedKinds = []CachedKind{{GVK: secretKind}, {GVK: roleKind}}
	desc.Indexes = []Index{{GVK: configMapKind, Name: "x"}}
	res, err := Resolve(testMapper(), desc, ResolveOptions{Namespaces: []string{"team-a"}})
	if err != nil {
		t.Fatal(err)
	}
	for gvk, want := range map[schema.GroupVersionKind][]string{secretKind: {"team-a"}, configMapKind: {"team-a"}, roleKind: nil} {
		if v, ok := res.Views[gvk]; !ok || !reflect.DeepEqual(v.Namespaces, want) {
			t.Errorf("%s: view %+v (cached %t), want namespaces %q", gvk.Kind, v, ok, want)
		}
		if !res.Declared[gvk] {
			t.Errorf("%s is not declared", gvk.Kind)
		}
	}

	desc.CachedKinds = []CachedKind{{GVK: secretKind, Namespaces: []string{"team-c"}}}
	if _, err := Resolve(testMapper(), desc, ResolveOptions{Namespaces: []string{"team-a"}}); err == nil || !strings.Contains(err.Error(), "none of which the host watches (--namespace team-a)") {
		t.Errorf("a cached kind outside the host's namespaces: %v", err)
	}
}
