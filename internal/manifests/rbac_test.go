package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyop/polyop/internal/sidecar"
)

var (
	widgetKind    = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	gadgetKind    = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}
	deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	configMapGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK     = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

// rulesOf flattens rules into "group/resource: verbs" lines, sorted.
func rulesOf(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				out = append(out, fmt.Sprintf("%s/%s: %s", g, res, strings.Join(r.Verbs, ",")))
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestRBACCoversWhatTheDescriptionNeedsAndNoMore(t *testing.T) {
	t.Parallel()
	desc := &sidecar.Description{Name: "shop", Controllers: []sidecar.Controller{
		{
			Name: "widgets", GVK: widgetKind, Finalizer: "example.com/cleanup",
			Owns:    []sidecar.Owned{{GVK: deploymentGVK}, {GVK: configMapGVK}},
			Watches: []sidecar.Watch{{GVK: secretGVK, FieldPath: []string{"spec", "secretName"}}, {GVK: configMapGVK, Label: "x"}},
		},
		{Name: "gadgets", GVK: gadgetKind},
	}}
	objs, err := RBAC(desc, RBACOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role := objs[0].(*rbacv1.ClusterRole)
	want := []string{
		"/configmaps: get,list,watch,create,update,patch,delete",
		"/secrets: get,list,watch",
		"apps/deployments: get,list,watch,create,update,patch,delete",
		"events.k8s.io/events: create,patch",
		"example.com/gadgets/status: get,update,patch",
		"example.com/gadgets: get,list,watch",
		"example.com/widgets/finalizers: update",
		"example.com/widgets/status: get,update,patch",
		"example.com/widgets: get,list,watch,update,patch",
	}
	slices.Sort(want)
	if got := rulesOf(role.Rules); !slices.Equal(got, want) {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Resources sharing a group and verbs share a rule.
	for _, r := range role.Rules {
		if r.APIGroups[0] == "example.com" && slices.Contains(r.Resources, "gadgets/status") && !slices.Contains(r.Resources, "widgets/status") {
			t.Errorf("gadgets/status and widgets/status, with the same verbs, are in different rules: %+v", role.Rules)
		}
	}
	if role.Name != "shop" || len(objs) != 2 {
		t.Errorf("got %d objects, the ClusterRole named %q; want a ClusterRole and its binding named after the sidecar", len(objs), role.Name)
	}
	binding := objs[1].(*rbacv1.ClusterRoleBinding)
	if binding.RoleRef.Name != "shop" || binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != "shop" || binding.Subjects[0].Namespace != "default" {
		t.Errorf("binding %+v, want ServiceAccount default/shop bound to ClusterRole shop", binding)
	}
}

func TestRBACOptions(t *testing.T) {
	t.Parallel()
	desc := &sidecar.Description{Name: "shop", Controllers: []sidecar.Controller{{Name: "widgets", GVK: widgetKind}}}

	objs, err := RBAC(desc, RBACOptions{Name: "shop-host", Namespace: "ops", ServiceAccount: "host", LeaderElection: true, MetricsAuth: true,
		Resolve: func(gvk schema.GroupVersionKind) (string, error) { return "widgetz", nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 4 {
		t.Fatalf("%d objects, want a ClusterRole, a ClusterRoleBinding, a Role and a RoleBinding", len(objs))
	}
	got := rulesOf(objs[0].(*rbacv1.ClusterRole).Rules)
	for _, want := range []string{"example.com/widgetz: get,list,watch", "authentication.k8s.io/tokenreviews: create", "authorization.k8s.io/subjectaccessreviews: create"} {
		if !slices.Contains(got, want) {
			t.Errorf("the ClusterRole lacks %q: %v", want, got)
		}
	}
	role := objs[2].(*rbacv1.Role)
	if role.Name != "shop-host-leader-election" || role.Namespace != "ops" {
		t.Errorf("leader election Role %s/%s, want ops/shop-host-leader-election", role.Namespace, role.Name)
	}
	if got := rulesOf(role.Rules); !slices.Equal(got, []string{"/events: create,patch", "coordination.k8s.io/leases: get,list,watch,create,update,patch,delete"}) {
		t.Errorf("leader election rules %v", got)
	}
	if s := objs[3].(*rbacv1.RoleBinding).Subjects[0]; s.Name != "host" || s.Namespace != "ops" {
		t.Errorf("RoleBinding subject %+v, want ops/host", s)
	}

	_, err = RBAC(desc, RBACOptions{Resolve: func(gvk schema.GroupVersionKind) (string, error) { return "", errors.New("not served") }})
	if err == nil || !strings.Contains(err.Error(), `controller "widgets": Widget: not served`) {
		t.Errorf("an unresolvable kind: %v, want an error naming the controller and the kind", err)
	}

	var out bytes.Buffer
	if err := WriteYAML(&out, objs); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n---\n"); n != 3 {
		t.Errorf("the YAML stream has %d separators, want 3:\n%s", n, out.String())
	}
}
