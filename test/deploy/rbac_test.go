package deploy

import (
	"errors"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// permission is one thing RBAC allows: a verb on a resource (optionally one
// object of it) in a namespace, or cluster-wide when namespace is "".
type permission struct {
	namespace, group, resource, name, verb string
}

func (p permission) String() string {
	s := p.verb + " " + p.resource
	if p.group != "" {
		s += "." + p.group
	}
	if p.name != "" {
		s += "/" + p.name
	}
	if p.namespace != "" {
		s += " in " + p.namespace
	}
	return s
}

type permissions map[permission]bool

func (ps permissions) add(namespace string, rules []rbacv1.PolicyRule) {
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					for _, v := range r.Verbs {
						ps[permission{namespace, g, res, n, v}] = true
					}
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				ps[permission{resource: u, verb: v}] = true
			}
		}
	}
}

// diff lists what ps has and other has not.
func (ps permissions) diff(other permissions) []string {
	var out []string
	for p := range ps {
		if !other[p] {
			out = append(out, p.String())
		}
	}
	sort.Strings(out)
	return out
}

// grantedTo collects what the rendered roles grant the ServiceAccount
// namespace/name through the rendered bindings.
func grantedTo(t *testing.T, objs []*unstructured.Unstructured, namespace, name string) permissions {
	t.Helper()
	clusterRoles := map[string]*rbacv1.ClusterRole{}
	for _, u := range find(objs, "ClusterRole") {
		clusterRoles[u.GetName()] = typed[rbacv1.ClusterRole](t, u)
	}
	roles := map[string]*rbacv1.Role{}
	for _, u := range find(objs, "Role") {
		roles[u.GetNamespace()+"/"+u.GetName()] = typed[rbacv1.Role](t, u)
	}
	isSubject := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == name && s.Namespace == namespace
		})
	}
	ps := permissions{}
	for _, u := range find(objs, "ClusterRoleBinding") {
		b := typed[rbacv1.ClusterRoleBinding](t, u)
		if !isSubject(b.Subjects) {
			continue
		}
		r, ok := clusterRoles[b.RoleRef.Name]
		if !ok {
			t.Errorf("ClusterRoleBinding %s binds ClusterRole %s, which is not rendered", b.Name, b.RoleRef.Name)
			continue
		}
		ps.add("", r.Rules)
	}
	for _, u := range find(objs, "RoleBinding") {
		b := typed[rbacv1.RoleBinding](t, u)
		if !isSubject(b.Subjects) {
			continue
		}
		switch b.RoleRef.Kind {
		case "Role":
			r, ok := roles[b.Namespace+"/"+b.RoleRef.Name]
			if !ok {
				t.Errorf("RoleBinding %s/%s binds Role %s, which is not rendered in its namespace", b.Namespace, b.Name, b.RoleRef.Name)
				continue
			}
			ps.add(b.Namespace, r.Rules)
		case "ClusterRole":
			r, ok := clusterRoles[b.RoleRef.Name]
			if !ok {
				t.Errorf("RoleBinding %s/%s binds ClusterRole %s, which is not rendered", b.Namespace, b.Name, b.RoleRef.Name)
				continue
			}
			ps.add(b.Namespace, r.Rules)
		}
	}
	return ps
}

// TestRBACIsWhatTheHostPrints checks, for every overlay, that the
// Deployment's ServiceAccount may do exactly what `host rbac` prints for the
// sidecar's description, asked of the running sidecar, with the leader
// election, metrics and sharding rules the Deployment's flags need — plus, with
// --webhook-self-signed, what keeping the certificate takes: the Secret, and
// get and patch on the overlay's own webhook configurations and converted
// CRDs, each by name — and what the example's sidecar does through the Cluster
// service beyond its description (examples' sidecarRules). Nothing more,
// nothing less.
func TestRBACIsWhatTheHostPrints(t *testing.T) {
	t.Parallel()
	for _, o := range overlays(t) {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			ex := exampleOf(t, o)
			objs := render(t, o.dir)
			dep := deployment(t, objs)
			pod := &dep.Spec.Template.Spec
			host := container(t, pod, "host")
			args := expandEnv(host, host.Args)
			ns, sa := dep.Namespace, pod.ServiceAccountName

			dirs := newPodDirs(t, pod)
			sc := container(t, pod, "sidecar")
			startSidecar(t, ex, sc, dirs)

			leaderElect, _ := flagValue(args, "leader-elect")
			metrics, _ := flagValue(args, "metrics-bind-address")
			secure, _ := flagValue(args, "metrics-secure")
			sharding, _ := flagValue(args, "sharding")
			hostRBAC := []string{"rbac",
				"--sidecar-address", dirs.local(sidecarAddress(ex, sc)),
				"--sidecar-wait-timeout", "60s",
				"--name", "expected", "--service-account-namespace", ns, "--service-account", sa,
				"--leader-election=" + boolString(leaderElect == "true"),
				"--metrics-auth=" + boolString(metrics != "" && metrics != "0" && secure != "false"),
				"--sharding=" + boolString(sharding != "" && sharding != "off"),
			}
			if watched, ok := flagValue(args, "namespace"); ok {
				hostRBAC = append(hostRBAC, "--namespace", watched)
			}
			out, err := exec.Command(hostBin, hostRBAC...).Output()
			if err != nil {
				t.Fatalf("host %s: %v\n%s", strings.Join(hostRBAC, " "), err, stderrOf(err))
			}
			printed, err := decode(out)
			if err != nil {
				t.Fatal(err)
			}
			want := grantedTo(t, printed, ns, sa)
			if len(want) == 0 {
				t.Fatalf("host rbac printed nothing for %s/%s:\n%s", ns, sa, out)
			}
			if _, selfSigned := flagValue(args, "webhook-self-signed"); selfSigned {
				addSelfSigned(t, want, ns, objs, args)
			}

			want.add("", ex.sidecarRules)

			got := grantedTo(t, objs, ns, sa)
			if missing := want.diff(got); len(missing) > 0 {
				t.Errorf("the overlay does not grant %s/%s what the host needs:\n  %s", ns, sa, strings.Join(missing, "\n  "))
			}
			if extra := got.diff(want); len(extra) > 0 {
				t.Errorf("the overlay grants %s/%s more than the host needs:\n  %s", ns, sa, strings.Join(extra, "\n  "))
			}
		})
	}
}

// addSelfSigned adds what a host with --webhook-self-signed needs beyond its
// description: the certificate's Secret in its namespace (created once, then
// read and updated by name), and get and patch on its own webhook
// configurations and converted CRDs, by name. It is derived from the
// rendered objects and flags, not from config/selfsigned.
func addSelfSigned(t *testing.T, want permissions, namespace string, objs []*unstructured.Unstructured, args []string) {
	t.Helper()
	secret, ok := flagValue(args, "webhook-cert-secret")
	if !ok {
		t.Fatal("--webhook-self-signed without --webhook-cert-secret: the default depends on the sidecar's name, which the RBAC cannot follow")
	}
	want.add(namespace, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secret}, Verbs: []string{"get", "update"}},
	})
	// Both kinds of configuration, by the one name the overlay gives them
	// (config/selfsigned cannot tell which kinds the sidecar declares): an
	// overlay with one kind grants get and patch on a name no object of the
	// other kind has.
	configuration, _ := flagValue(args, "webhook-configuration-name")
	var rules []rbacv1.PolicyRule
	if len(find(objs, "MutatingWebhookConfiguration"))+len(find(objs, "ValidatingWebhookConfiguration")) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"},
			Resources:     []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
			ResourceNames: []string{configuration}, Verbs: []string{"get", "patch"}})
	}
	for _, crd := range convertedCRDs(t, objs) {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
			ResourceNames: []string{crd.GetName()}, Verbs: []string{"get", "patch"}})
	}
	want.add("", rules)
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
