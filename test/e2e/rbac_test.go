package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// TestHostRunsWithTheRBACItPrints applies what `host rbac --namespace NS`
// prints for testsidecar children, then runs the host, scoped to NS as the
// fixture runs it, as that ServiceAccount (impersonated), with leader
// election: children, status, watches, the cluster service, events and the
// finalizer all work, and a kind the description does not name is forbidden.
// The RBAC is namespaced: the ServiceAccount may write the declared kinds in
// NS, and nothing in kube-system.
func TestHostRunsWithTheRBACItPrints(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar()

	const account = "polyop-host"
	name := "polyop-" + f.ns
	out, err := exec.Command(hostBin, "rbac", "--sidecar-address", f.address(), "--kubeconfig", env.Kubeconfig,
		"--name", name, "--namespace", f.ns, "--service-account", account).CombinedOutput()
	if err != nil {
		t.Fatalf("host rbac: %v\n%s", err, out)
	}
	t.Logf("host rbac printed:\n%s", out)
	if !strings.Contains(string(out), "resolved through the API server's discovery") {
		t.Errorf("host rbac does not say it resolved resources through discovery")
	}
	if strings.Contains(string(out), "kind: ClusterRole") {
		t.Errorf("host rbac --namespace printed a ClusterRole, though the host watches one namespace and nothing cluster-scoped")
	}
	manifest := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(manifest, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(t, "apply", "-f", manifest); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "-f", manifest, "--ignore-not-found") })
	f.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: account}})

	// A kubeconfig whose user is the ServiceAccount.
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = "system:serviceaccount:" + f.ns + ":" + account
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + f.ns + ":" + account
	for _, tc := range []struct {
		verb, group, resource, subresource, namespace string
		want                                          bool
	}{
		{"create", "", "configmaps", "", f.ns, true},
		{"delete", "", "secrets", "", f.ns, true},
		{"patch", "e2e.polyop.dev", "widgets", "status", f.ns, true},
		{"create", "events.k8s.io", "events", "", f.ns, true},
		{"create", "", "configmaps", "", "kube-system", false},
		{"update", "", "configmaps", "", "default", false},
		{"list", "e2e.polyop.dev", "widgets", "", "kube-system", false},
		{"create", "events.k8s.io", "events", "", "kube-system", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + f.ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: tc.verb, Group: tc.group, Resource: tc.resource, Subresource: tc.subresource, Namespace: tc.namespace,
			},
		}}
		if err := k8s.Create(context.Background(), sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.want {
			resource := schema.GroupResource{Group: tc.group, Resource: tc.resource}.String()
			if tc.subresource != "" {
				resource += "/" + tc.subresource
			}
			t.Errorf("may %s %s %s in %s: %v (%s), want %v", user, tc.verb, resource, tc.namespace, sar.Status.Allowed, sar.Status.Reason, tc.want)
		}
	}

	host := f.startHost("--kubeconfig", kubeconfig, "--leader-elect", "--leader-election-namespace", f.ns)

	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "settings"}, Data: map[string]string{"value": "hi"}})
	f.createWidget("w", map[string]any{"configMaps": []any{"a"}, "secrets": []any{"s"}, "value": "v", "configMapName": "settings"})
	testenv.Eventually(f.t, 2*time.Minute, "the widget converges as the ServiceAccount", func() (bool, string) {
		u := f.getWidget("w")
		return statusList(u, "configMaps") == "a" && statusString(u, "configMapValue") == "hi" && f.secret("s") != nil, fmt.Sprint(u.Object["status"])
	})
	f.setSpec("w", map[string]any{"configMaps": []any{"a"}, "value": "v"})
	testenv.Eventually(f.t, time.Minute, "the Secret is pruned", func() (bool, string) { return f.secret("s") == nil, "" })

	if err := k8s.Delete(context.Background(), f.getWidget("w")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(f.t, time.Minute, "the finalizer is removed and the widget deleted", func() (bool, string) { return f.getWidget("w") == nil, "" })
	testenv.Eventually(f.t, time.Minute, "the Finalized event is recorded", func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == "Finalized" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})

	_, err = f.clusterClient().List(ctxTimeout(t, time.Minute), &polyopv1alpha1.ListRequest{
		Kind: &polyopv1alpha1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: f.ns})
	if code, s := apiStatusOf(err); code != codes.PermissionDenied || s == nil || s.Reason != metav1.StatusReasonForbidden {
		t.Errorf("listing a kind the description does not name: %v; want PERMISSION_DENIED with reason Forbidden", err)
	}
	if out := host.Output(); strings.Contains(out, "forbidden") && !strings.Contains(out, "deployments.apps is forbidden") {
		t.Errorf("the host was refused something it needs:\n%s", out)
	}
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "childsidecar.polyop.dev"}, lease); err != nil || lease.Spec.HolderIdentity == nil {
		t.Errorf("the host holds no leader election lease: %v, %+v", err, lease.Spec)
	}
}
