package manifests

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyop/polyop/internal/description"
)

var (
	widgetKind    = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	gadgetKind    = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}
	deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	configMapGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK     = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

// resolve resolves desc as `host rbac` does without discovery, narrowed to
// namespaces.
func resolve(t *testing.T, desc *description.Description, namespaces ...string) *description.Resolved {
	t.Helper()
	res, err := description.Resolve(description.GuessingMapper(desc), desc, description.ResolveOptions{Namespaces: namespaces})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

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
	desc := &description.Description{Name: "shop", Controllers: []description.Controller{
		{
			Name: "widgets", GVK: widgetKind, Finalizer: "example.com/cleanup",
			Owns:    []description.Owned{{GVK: deploymentGVK}, {GVK: configMapGVK}},
			Watches: []description.Watch{{GVK: secretGVK, FieldPath: []string{"spec", "secretName"}}, {GVK: configMapGVK, Label: "x"}},
		},
		{Name: "gadgets", GVK: gadgetKind},
	}}
	objs, err := RBAC(resolve(t, desc), RBACOptions{})
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
	desc := &description.Description{Name: "shop", Controllers: []description.Controller{{Name: "widgets", GVK: widgetKind}}}

	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(widgetKind, widgetKind.GroupVersion().WithResource("widgetz"), widgetKind.GroupVersion().WithResource("widget"), meta.RESTScopeNamespace)
	res, err := description.Resolve(mapper, desc, description.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := RBAC(res, RBACOptions{Name: "shop-host", Namespace: "ops", ServiceAccount: "host", LeaderElection: true, MetricsAuth: true})
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

	var out bytes.Buffer
	if err := WriteYAML(&out, objs); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n---\n"); n != 3 {
		t.Errorf("the YAML stream has %d separators, want 3:\n%s", n, out.String())
	}
}

// granted flattens the rules of objs into "where group/resource: verbs"
// lines, where being "cluster" for a ClusterRole and the namespace for a
// Role, checking that each role is bound to the host's ServiceAccount.
func granted(t *testing.T, objs []runtime.Object, namespace, account string) []string {
	t.Helper()
	var out []string
	bound := map[string]bool{}
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			for _, r := range rulesOf(o.Rules) {
				out = append(out, "cluster "+r)
			}
		case *rbacv1.Role:
			for _, r := range rulesOf(o.Rules) {
				out = append(out, o.Namespace+" "+r)
			}
		case *rbacv1.ClusterRoleBinding:
			bound["cluster "+o.RoleRef.Name] = o.Subjects[0].Namespace == namespace && o.Subjects[0].Name == account
		case *rbacv1.RoleBinding:
			bound[o.Namespace+" "+o.RoleRef.Name] = o.Subjects[0].Namespace == namespace && o.Subjects[0].Name == account
		}
	}
	for _, o := range objs {
		var key string
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			key = "cluster " + o.Name
		case *rbacv1.Role:
			key = o.Namespace + " " + o.Name
		default:
			continue
		}
		if !bound[key] {
			t.Errorf("%s is not bound to ServiceAccount %s/%s", key, namespace, account)
		}
	}
	slices.Sort(out)
	return out
}

func TestRBACIsNamespacedWhereTheControllersAre(t *testing.T) {
	t.Parallel()
	widgets := description.Controller{
		Name: "widgets", GVK: widgetKind, Finalizer: "example.com/cleanup",
		Owns:    []description.Owned{{GVK: configMapGVK}},
		Watches: []description.Watch{{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, FieldPath: []string{"spec", "ns"}}},
	}
	gadgets := description.Controller{Name: "gadgets", GVK: gadgetKind, Owns: []description.Owned{{GVK: secretGVK}}}
	widgetRules := func(where string) []string {
		return []string{
			where + " /configmaps: get,list,watch,create,update,patch,delete",
			where + " events.k8s.io/events: create,patch",
			where + " example.com/widgets/finalizers: update",
			where + " example.com/widgets/status: get,update,patch",
			where + " example.com/widgets: get,list,watch,update,patch",
		}
	}
	for name, tc := range map[string]struct {
		controllers     []description.Controller
		watchNamespaces []string
		metricsAuth     bool
		want            []string
		wantErr         string
	}{
		"if every controller declares namespaces, then Roles in them, and a ClusterRole for the cluster-scoped kind only": {
			controllers: []description.Controller{withNamespaces(widgets, "a", "b")},
			want: slices.Concat(widgetRules("a"), widgetRules("b"), []string{
				"cluster /namespaces: get,list,watch",
			}),
		},
		"if the host's --namespace limits a controller declaring none, then Roles in that namespace": {
			controllers:     []description.Controller{withNamespaces(gadgets)},
			watchNamespaces: []string{"ops"},
			want: []string{
				"ops /secrets: get,list,watch,create,update,patch,delete",
				"ops events.k8s.io/events: create,patch",
				"ops example.com/gadgets/finalizers: update",
				"ops example.com/gadgets/status: get,update,patch",
				"ops example.com/gadgets: get,list,watch",
			},
		},
		"if the host's --namespace narrows declared namespaces, then Roles in those both allow": {
			controllers:     []description.Controller{withNamespaces(widgets, "a", "b")},
			watchNamespaces: []string{"b", "c"},
			want:            append(widgetRules("b"), "cluster /namespaces: get,list,watch"),
		},
		"if a controller watches every namespace, then its rules are cluster-wide and the others' namespaced": {
			controllers: []description.Controller{withNamespaces(widgets, "a"), withNamespaces(gadgets)},
			metricsAuth: true,
			want: slices.Concat(
				// events are granted cluster-wide already
				slices.DeleteFunc(widgetRules("a"), func(s string) bool { return strings.Contains(s, "events") }),
				[]string{
					"cluster /namespaces: get,list,watch",
					"cluster /secrets: get,list,watch,create,update,patch,delete",
					"cluster authentication.k8s.io/tokenreviews: create",
					"cluster authorization.k8s.io/subjectaccessreviews: create",
					"cluster events.k8s.io/events: create,patch",
					"cluster example.com/gadgets/finalizers: update",
					"cluster example.com/gadgets/status: get,update,patch",
					"cluster example.com/gadgets: get,list,watch",
				}),
		},
		"if the host's --namespace leaves a controller none of its namespaces, then it is an error": {
			controllers:     []description.Controller{withNamespaces(widgets, "a")},
			watchNamespaces: []string{"b"},
			wantErr:         `controller "widgets" watches namespaces [a], none of which the host may watch ([b])`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			desc := &description.Description{Name: "shop", Controllers: tc.controllers}
			res, err := description.Resolve(description.GuessingMapper(desc), desc, description.ResolveOptions{Namespaces: tc.watchNamespaces})
			if err == nil {
				_, err = RBAC(res, RBACOptions{Namespace: "ops", ServiceAccount: "host", MetricsAuth: tc.metricsAuth})
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			objs, _ := RBAC(res, RBACOptions{Namespace: "ops", ServiceAccount: "host", MetricsAuth: tc.metricsAuth})
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if got := granted(t, objs, "ops", "host"); !slices.Equal(got, want) {
				t.Errorf("granted:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

func TestRBACWithoutDiscoveryKnowsTheBuiltInClusterScopedKinds(t *testing.T) {
	t.Parallel()
	desc := &description.Description{Name: "shop", Controllers: []description.Controller{withNamespaces(description.Controller{
		Name: "widgets", GVK: widgetKind,
		Watches: []description.Watch{
			{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Node"}, FieldPath: []string{"spec", "node"}},
			{GVK: schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, FieldPath: []string{"spec", "role"}},
		},
	}, "a")}}
	objs, err := RBAC(resolve(t, desc), RBACOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := granted(t, objs, "default", "shop")
	for _, want := range []string{"cluster /nodes: get,list,watch", "cluster rbac.authorization.k8s.io/clusterroles: get,list,watch", "a example.com/widgets: get,list,watch"} {
		if !slices.Contains(got, want) {
			t.Errorf("%q not granted; granted:\n  %s", want, strings.Join(got, "\n  "))
		}
	}
}

func withNamespaces(c description.Controller, namespaces ...string) description.Controller {
	c.Namespaces = namespaces
	return c
}

func TestRBACReadsTheDeclaredKindsWhereTheHostCachesThem(t *testing.T) {
	t.Parallel()
	podGVK := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	jobGVK := schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	nodeGVK := schema.GroupVersionKind{Version: "v1", Kind: "Node"}
	desc := &description.Description{
		Name:        "shop",
		Controllers: []description.Controller{{Name: "widgets", GVK: widgetKind, Namespaces: []string{"team-a"}}},
		CachedKinds: []description.CachedKind{{GVK: podGVK}, {GVK: nodeGVK}},
		Indexes:     []description.Index{{GVK: jobGVK, Name: ".metadata.controller"}},
	}
	objs, err := RBAC(resolve(t, desc, "team-a"), RBACOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var clusterRules, teamA []string
	for _, o := range objs {
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			clusterRules = rulesOf(r.Rules)
		case *rbacv1.Role:
			if r.Namespace == "team-a" {
				teamA = rulesOf(r.Rules)
			}
		}
	}
	if !slices.Contains(clusterRules, "/nodes: get,list,watch") {
		t.Errorf("the ClusterRole does not read the cached cluster-scoped Nodes: %q", clusterRules)
	}
	for _, want := range []string{"/pods: get,list,watch", "batch/jobs: get,list,watch"} {
		if !slices.Contains(teamA, want) || slices.Contains(clusterRules, want) {
			t.Errorf("%s is not granted in team-a only (the host's namespace): Role %q, ClusterRole %q", want, teamA, clusterRules)
		}
	}
}

// shardingRBAC is the RBAC of a sidecar reconciling widgetz, in namespace
// ops, sharded in mode: a ClusterRole, its binding, a Role and its binding.
func shardingRBAC(t *testing.T, mode string) []runtime.Object {
	t.Helper()
	desc := &description.Description{Name: "shop", Controllers: []description.Controller{{Name: "widgets", GVK: widgetKind}}}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(widgetKind, widgetKind.GroupVersion().WithResource("widgetz"), widgetKind.GroupVersion().WithResource("widget"), meta.RESTScopeNamespace)
	res, err := description.Resolve(mapper, desc, description.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := RBAC(res, RBACOptions{Name: "shop-host", Namespace: "ops", ServiceAccount: "host", Sharding: mode})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 4 {
		t.Fatalf("%d objects, want a ClusterRole, a ClusterRoleBinding, a Role and a RoleBinding", len(objs))
	}
	return objs
}

// --sharding=labels patches the reconciled kind's labels and holds a Lease
// per replica in the host's namespace.
func TestRBACForShardingPatchesTheReconciledKindAndHoldsLeases(t *testing.T) {
	t.Parallel()
	objs := shardingRBAC(t, ShardingLabels)
	if got := rulesOf(objs[0].(*rbacv1.ClusterRole).Rules); !slices.Contains(got, "example.com/widgetz: get,list,watch,patch") {
		t.Errorf("the ClusterRole does not patch widgetz: %v", got)
	}
	role := objs[2].(*rbacv1.Role)
	if got := rulesOf(role.Rules); role.Namespace != "ops" || !slices.Contains(got, "coordination.k8s.io/leases: get,list,watch,create,update,patch,delete") {
		t.Errorf("Role %s/%s rules %v, want leases in ops", role.Namespace, role.Name, got)
	}
}

// --sharding=server labels no object of the reconciled kind: it holds a
// Lease per replica, and patches nothing it would not patch unsharded.
func TestRBACForServerShardingHoldsLeasesOnly(t *testing.T) {
	t.Parallel()
	objs := shardingRBAC(t, ShardingServer)
	if got := rulesOf(objs[0].(*rbacv1.ClusterRole).Rules); !slices.Contains(got, "example.com/widgetz: get,list,watch") {
		t.Errorf("the ClusterRole grants on widgetz %v, want get, list and watch only", got)
	}
	role := objs[2].(*rbacv1.Role)
	if got := rulesOf(role.Rules); role.Namespace != "ops" || !slices.Contains(got, "coordination.k8s.io/leases: get,list,watch,create,update,patch,delete") {
		t.Errorf("Role %s/%s rules %v, want leases in ops", role.Namespace, role.Name, got)
	}
}
