package manifests

import (
	"maps"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/polyop/polyop/internal/description"
)

// RBACOptions shape the RBAC manifests.
type RBACOptions struct {
	// Name names the ClusterRole, the namespaced Roles and their bindings,
	// and prefixes the leader election Role and RoleBinding. Defaults to the
	// sidecar's name.
	Name string
	// Namespace is the namespace the host runs in: its ServiceAccount's, and
	// its leader election lease's. Defaults to "default".
	Namespace string
	// ServiceAccount is the host's ServiceAccount. Defaults to Name.
	ServiceAccount string
	// LeaderElection adds a Role, and its RoleBinding, for the leader election
	// lease in Namespace (and the events leader election records). Defaults to
	// false.
	LeaderElection bool
	// MetricsAuth adds the rules the host's secure metrics endpoint needs
	// (--metrics-secure): creating TokenReviews and SubjectAccessReviews.
	// Defaults to false.
	MetricsAuth bool
	// Sharding adds what the host's --sharding mode needs: for both modes
	// ("labels" and "server"), the Role on leases in Namespace that
	// LeaderElection adds, where each replica holds its Lease in the ring;
	// for "labels", patch on each reconciled kind too (the elected replica
	// labels each object with its replica, and a replica removes its labels
	// to hand an object off). Server mode labels no object of the reconciled
	// kind (the children, which the host writes anyway, carry the shard
	// label). Defaults to "": no sharding.
	Sharding string
}

// The values of RBACOptions.Sharding.
const (
	ShardingLabels = "labels"
	ShardingServer = "server"
)

func (o RBACOptions) withDefaults(desc *description.Resolved) RBACOptions {
	if o.Name == "" {
		o.Name = desc.Name
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = o.Name
	}
	return o
}

// RBAC renders the RBAC the host needs for what res declares, and nothing
// more: every grant of res.Grants (the one definition of what a description
// grants, which the host's Cluster service serves by too) as a rule, and what
// the host's own options need.
//
// Where a grant is given follows where the controller watches:
//
//   - for a controller limited to namespaces (declared, or narrowed by
//     the host's --namespace when res was resolved), a Role in each of its namespaces, with a RoleBinding
//     to the host's ServiceAccount, named Name; a cluster-scoped kind it
//     watches goes to the ClusterRole, since the host watches it everywhere;
//   - for a controller that watches every namespace, the ClusterRole, named
//     Name, with its ClusterRoleBinding.
//
// The ClusterRole also holds, with MetricsAuth, create on TokenReviews and
// SubjectAccessReviews; it is left out, with its binding, when it would hold
// nothing. With LeaderElection, a Role in the host's namespace on leases, and
// on the core events leader election records, and its RoleBinding, are added.
// With Sharding, that Role too (each replica holds a Lease in the ring), and
// in label mode patch on each reconciled kind (its objects' shard labels).
//
// What the sidecar does imperatively through the Cluster service beyond these
// verbs, on the kinds its description names (the only kinds the service
// writes), is not in the description, so it is not here: grant it in a role
// of its own, bound to the same ServiceAccount.
func RBAC(res *description.Resolved, opts RBACOptions) ([]runtime.Object, error) {
	desc := res.Description
	opts = opts.withDefaults(res)
	cluster := ruleSet{}
	namespaced := map[string]ruleSet{}
	add := func(k description.Kind, subresource string, namespaces []string, verbs ...string) {
		resource := k.Resource
		if subresource != "" {
			resource += "/" + subresource
		}
		if len(namespaces) == 0 || !k.Namespaced {
			cluster.add(k.GVK.Group, resource, verbs...)
			return
		}
		for _, ns := range namespaces {
			if namespaced[ns] == nil {
				namespaced[ns] = ruleSet{}
			}
			namespaced[ns].add(k.GVK.Group, resource, verbs...)
		}
	}
	for _, g := range res.Grants().All() {
		add(g.Kind, g.Subresource, g.Namespaces, g.Verbs...)
	}
	if opts.Sharding == ShardingLabels {
		for _, c := range desc.Controllers {
			add(res.Kinds[c.GVK], "", c.Namespaces, "patch")
		}
	}
	if opts.MetricsAuth {
		cluster.add("authentication.k8s.io", "tokenreviews", "create")
		cluster.add("authorization.k8s.io", "subjectaccessreviews", "create")
	}

	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: opts.ServiceAccount, Namespace: opts.Namespace}}
	var objs []runtime.Object
	if len(cluster) > 0 {
		objs = append(objs,
			&rbacv1.ClusterRole{
				TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
				ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: rbacLabels(desc)},
				Rules:      cluster.rules(),
			},
			&rbacv1.ClusterRoleBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
				ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: rbacLabels(desc)},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: opts.Name},
				Subjects:   subjects,
			},
		)
	}
	role := func(name, namespace string, rules ruleSet) []runtime.Object {
		return []runtime.Object{
			&rbacv1.Role{
				TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: rbacLabels(desc)},
				Rules:      rules.rules(),
			},
			&rbacv1.RoleBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: rbacLabels(desc)},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects:   subjects,
			},
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(namespaced)) {
		// What the ClusterRole grants already need not be granted again.
		if rules := namespaced[ns].without(cluster); len(rules) > 0 {
			objs = append(objs, role(opts.Name, ns, rules)...)
		}
	}
	if opts.LeaderElection || opts.Sharding != "" {
		le := ruleSet{}
		le.add("coordination.k8s.io", "leases", "get", "list", "watch", "create", "update", "patch", "delete")
		le.add("", "events", "create", "patch")
		objs = append(objs, role(opts.Name+"-leader-election", opts.Namespace, le)...)
	}
	return objs, nil
}

func rbacLabels(desc *description.Description) map[string]string {
	return map[string]string{"app.kubernetes.io/name": desc.Name, "app.kubernetes.io/managed-by": "polyop"}
}

// ruleSet collects verbs by API group and resource.
type ruleSet map[string]map[string][]string

func (s ruleSet) add(group, resource string, verbs ...string) {
	if s[group] == nil {
		s[group] = map[string][]string{}
	}
	for _, v := range verbs {
		if !slices.Contains(s[group][resource], v) {
			s[group][resource] = append(s[group][resource], v)
		}
	}
}

// without returns the verbs of s that other does not grant.
func (s ruleSet) without(other ruleSet) ruleSet {
	out := ruleSet{}
	for group, resources := range s {
		for resource, verbs := range resources {
			for _, v := range verbs {
				if !slices.Contains(other[group][resource], v) {
					out.add(group, resource, v)
				}
			}
		}
	}
	return out
}

// rules renders the set as few rules as it takes: one per API group and set
// of verbs, listing its resources, in a stable order.
func (s ruleSet) rules() []rbacv1.PolicyRule {
	type key struct{ group, verbs string }
	byVerbs := map[key][]string{}
	for group, resources := range s {
		for resource, verbs := range resources {
			v := slices.Clone(verbs)
			sort.Slice(v, func(i, j int) bool { return verbRank(v[i]) < verbRank(v[j]) })
			k := key{group, strings.Join(v, ",")}
			byVerbs[k] = append(byVerbs[k], resource)
		}
	}
	out := make([]rbacv1.PolicyRule, 0, len(byVerbs))
	for k, resources := range byVerbs {
		sort.Strings(resources)
		out = append(out, rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: resources, Verbs: strings.Split(k.verbs, ",")})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].APIGroups[0] != out[j].APIGroups[0] {
			return out[i].APIGroups[0] < out[j].APIGroups[0]
		}
		return out[i].Resources[0] < out[j].Resources[0]
	})
	return out
}

// verbRank orders verbs as kubectl and kubebuilder print them.
func verbRank(v string) int {
	order := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	if i := slices.Index(order, v); i >= 0 {
		return i
	}
	return len(order)
}
