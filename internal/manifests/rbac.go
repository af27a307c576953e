package manifests

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyop/polyop/internal/sidecar"
)

// ResourceResolver maps a kind to its resource (plural, lower case), for
// example through a RESTMapper.
type ResourceResolver func(gvk schema.GroupVersionKind) (string, error)

// RBACOptions shape the RBAC manifests.
type RBACOptions struct {
	// Name names the ClusterRole and ClusterRoleBinding, and prefixes the
	// leader election Role and RoleBinding. Defaults to the sidecar's name.
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
	// Resolve maps each kind to its resource. Defaults to the resource a
	// webhook of the kind declares, or else a guess from the kind (lower case,
	// plural), which is right for nearly every kind but not all: pass a
	// resolver backed by API discovery to be sure.
	Resolve ResourceResolver
}

func (o RBACOptions) withDefaults(desc *sidecar.Description) RBACOptions {
	if o.Name == "" {
		o.Name = desc.Name
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = o.Name
	}
	if o.Resolve == nil {
		o.Resolve = func(gvk schema.GroupVersionKind) (string, error) {
			return resourceOf(desc, gvk.GroupKind(), gvk.Version), nil
		}
	}
	return o
}

// The verbs each use of a kind needs.
var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "update", "patch", "delete"}
	// The host patches status; update and get are what kubebuilder grants on
	// a status subresource, for a sidecar that writes status imperatively.
	statusVerbs = []string{"get", "update", "patch"}
)

// RBAC renders the RBAC the host needs for what desc declares, and nothing
// more:
//
//   - a ClusterRole with get, list and watch on every reconciled, owned and
//     watched kind (the host caches them); get, update and patch on each
//     reconciled kind's status (the host writes the status the sidecar
//     returns); update and patch on a reconciled kind itself when its
//     controller declares a finalizer (the host adds and removes it); update
//     on its finalizers subresource when its controller owns kinds (the API
//     server may require it to set blockOwnerDeletion on a child's owner
//     reference); create, update, patch and delete on every owned kind (the
//     host applies and prunes children); create and patch on events.k8s.io
//     events (the host records events); and, with MetricsAuth, create on
//     TokenReviews and SubjectAccessReviews;
//   - its ClusterRoleBinding to the host's ServiceAccount;
//   - with LeaderElection, a Role in the host's namespace on leases, and on
//     the core events leader election records, and its RoleBinding.
//
// What the sidecar reads or writes imperatively through the cluster service
// beyond the kinds it declares is not in the description, so it is not here:
// grant it in a role of its own, bound to the same ServiceAccount.
func RBAC(desc *sidecar.Description, opts RBACOptions) ([]runtime.Object, error) {
	opts = opts.withDefaults(desc)
	rules := ruleSet{}
	var errs []error
	resolve := func(c sidecar.Controller, gvk schema.GroupVersionKind) string {
		resource, err := opts.Resolve(gvk)
		if err != nil {
			errs = append(errs, fmt.Errorf("controller %q: %s: %w", c.Name, gvk.Kind, err))
		}
		return resource
	}
	for _, c := range desc.Controllers {
		r := resolve(c, c.GVK)
		rules.add(c.GVK.Group, r, readVerbs...)
		rules.add(c.GVK.Group, r+"/status", statusVerbs...)
		if c.Finalizer != "" {
			rules.add(c.GVK.Group, r, "update", "patch")
		}
		if len(c.Owns) > 0 {
			rules.add(c.GVK.Group, r+"/finalizers", "update")
		}
		for _, o := range c.Owns {
			r := resolve(c, o.GVK)
			rules.add(o.GVK.Group, r, readVerbs...)
			rules.add(o.GVK.Group, r, writeVerbs...)
		}
		for _, w := range c.Watches {
			rules.add(w.GVK.Group, resolve(c, w.GVK), readVerbs...)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(desc.Controllers) > 0 {
		rules.add("events.k8s.io", "events", "create", "patch")
	}
	if opts.MetricsAuth {
		rules.add("authentication.k8s.io", "tokenreviews", "create")
		rules.add("authorization.k8s.io", "subjectaccessreviews", "create")
	}

	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: opts.ServiceAccount, Namespace: opts.Namespace}}
	objs := []runtime.Object{
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: rbacLabels(desc)},
			Rules:      rules.rules(),
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: rbacLabels(desc)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: opts.Name},
			Subjects:   subjects,
		},
	}
	if opts.LeaderElection {
		le := ruleSet{}
		le.add("coordination.k8s.io", "leases", "get", "list", "watch", "create", "update", "patch", "delete")
		le.add("", "events", "create", "patch")
		name := opts.Name + "-leader-election"
		objs = append(objs,
			&rbacv1.Role{
				TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: opts.Namespace, Labels: rbacLabels(desc)},
				Rules:      le.rules(),
			},
			&rbacv1.RoleBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: opts.Namespace, Labels: rbacLabels(desc)},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects:   subjects,
			},
		)
	}
	return objs, nil
}

func rbacLabels(desc *sidecar.Description) map[string]string {
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
