package description

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestGrantsFollowWhatTheDescriptionDeclares(t *testing.T) {
	t.Parallel()
	var (
		widgets    = schema.GroupResource{Group: "example.com", Resource: "widgets"}
		configMaps = schema.GroupResource{Resource: "configmaps"}
		secrets    = schema.GroupResource{Resource: "secrets"}
		roles      = schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}
		events     = schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	)
	desc := describe(Controller{Name: "w", GVK: widgetKind, Namespaces: []string{"a"}, Finalizer: "example.com/cleanup",
		Owns: []Owned{{GVK: configMapKind}}, Watches: []Watch{{GVK: roleKind, FieldPath: []string{"spec", "role"}}}})
	desc.CachedKinds = []CachedKind{{GVK: secretKind, Namespaces: []string{"a"}}}
	res, err := Resolve(testMapper(), desc, ResolveOptions{WebhooksOff: true})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Grants()
	for name, tc := range map[string]struct {
		gr                    schema.GroupResource
		subresource, verb, ns string
		want                  bool
	}{
		"if a controller reconciles a kind, then it may be read where the controller watches":      {gr: widgets, verb: "list", ns: "a", want: true},
		"if a controller reconciles a kind, then it may not be read where the controller does not": {gr: widgets, verb: "list", ns: "b"},
		"if a controller reconciles a kind, then it may not be listed across every namespace":      {gr: widgets, verb: "list"},
		"if a controller reconciles a kind, then its status may be patched":                        {gr: widgets, subresource: "status", verb: "patch", ns: "a", want: true},
		"if a controller declares a finalizer, then its kind may be updated":                       {gr: widgets, verb: "update", ns: "a", want: true},
		"if a controller reconciles a kind, then it may not be deleted":                            {gr: widgets, verb: "delete", ns: "a"},
		"if a controller owns a kind, then it may be deleted":                                      {gr: configMaps, verb: "delete", ns: "a", want: true},
		"if a controller watches a cluster-scoped kind, then it may be read everywhere":            {gr: roles, verb: "list", want: true},
		"if a controller watches a kind, then it may not be written":                               {gr: roles, verb: "create"},
		"if a kind is cached in a namespace, then it may be read there":                            {gr: secrets, verb: "get", ns: "a", want: true},
		"if a kind is cached in a namespace, then it may not be read elsewhere":                    {gr: secrets, verb: "get", ns: "b"},
		"if a controller watches a namespace, then events may be recorded there":                   {gr: events, verb: "create", ns: "a", want: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := g.Allows(tc.gr, tc.subresource, tc.verb, tc.ns); got != tc.want {
				t.Errorf("Allows(%s, %q, %s, %q) = %v, want %v", tc.gr, tc.subresource, tc.verb, tc.ns, got, tc.want)
			}
		})
	}
	for gr, want := range map[schema.GroupResource]bool{widgets: true, configMaps: true, roles: true, secrets: true, events: true,
		{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}: false, {Group: "apps", Resource: "deployments"}: false} {
		if got := g.Names(gr); got != want {
			t.Errorf("Names(%s) = %v, want %v", gr, got, want)
		}
	}
	if got := g.Namespaces(secrets, "get"); len(got) != 1 || got[0] != "a" {
		t.Errorf("Namespaces(secrets, get) = %v, want [a]", got)
	}
}
