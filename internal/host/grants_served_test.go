package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// runHostFor runs the host, with the control plane's admin credentials (as
// polyop run does with a developer's), for a fake sidecar that describes
// itself as desc, and returns a client of its Cluster service on the unix
// socket it serves, once it serves. The host stops when the test ends.
func runHostFor(t *testing.T, env *testenv.Env, desc *polyopv1alpha1.DescribeResponse) polyopv1alpha1.ClusterServiceClient {
	t.Helper()
	sidecarAddress, _ := fakesidecar.Serve(t, &fakesidecar.Fake{
		OnDescribe: fakesidecar.Answer(func(*polyopv1alpha1.DescribeRequest) *polyopv1alpha1.DescribeResponse { return desc }),
		OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
			return &polyopv1alpha1.ReconcileResponse{}
		}),
	})
	// Not t.TempDir(): a unix socket's path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "po-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	opts := NewOptions()
	opts.SidecarAddress = sidecarAddress
	opts.ClusterAddress = "unix://" + filepath.Join(dir, "cluster.sock")
	opts.HealthProbeBindAddress = "0"
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	returned := make(chan struct{})
	go func() { defer close(returned); runErr = Run(ctx, env.Config, opts) }()
	t.Cleanup(func() {
		cancel()
		<-returned
		if runErr != nil && !errors.Is(runErr, context.Canceled) {
			t.Errorf("the host returned %v", runErr)
		}
	})
	conn, err := grpc.NewClient(opts.ClusterAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	cs := polyopv1alpha1.NewClusterServiceClient(conn)
	testenv.Eventually(t, time.Minute, "the host serves its Cluster service", func() (bool, string) {
		select {
		case <-returned:
			t.Fatalf("the host returned before serving: %v", runErr)
		default:
		}
		_, err := cs.ResolveKind(ctx, &polyopv1alpha1.ResolveKindRequest{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}})
		return err == nil, fmt.Sprint(err)
	})
	return cs
}

// configMapSidecar describes a sidecar whose controller, named controller
// (unique in the process, as controller-runtime requires), reconciles
// ConfigMaps in namespace, with cachedKinds declared for cached reads.
func configMapSidecar(controller, namespace string, cachedKinds ...*polyopv1alpha1.CachedKind) *polyopv1alpha1.DescribeResponse {
	return &polyopv1alpha1.DescribeResponse{
		ProtocolVersion: description.ProtocolVersion,
		Name:            "probe",
		Controllers: []*polyopv1alpha1.ControllerDescription{{
			Name:       controller,
			ForKind:    &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Namespaces: []string{namespace},
		}},
		CachedKinds: cachedKinds,
	}
}

// A sidecar whose host runs with admin credentials still cannot bind itself
// to cluster-admin, nor read a Secret, through the Cluster service, unless
// its description declares those kinds: then it can, as the RBAC generated
// from that description would let the deployed host.
func TestTheClusterServiceServesWhatTheDescriptionDeclaresWhateverTheHostsCredentials(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	k8s, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ns = "probe"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "credentials"}, StringData: map[string]string{"password": "hunter2"}},
	} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	const binding = "probe-cluster-admin"
	createBinding := func(cs polyopv1alpha1.ClusterServiceClient) error {
		_, err := cs.Create(ctx, &polyopv1alpha1.CreateRequest{
			Kind: &polyopv1alpha1.GroupVersionKind{Group: rbacv1.GroupName, Version: "v1", Kind: "ClusterRoleBinding"},
			Key:  &polyopv1alpha1.ObjectKey{Name: binding},
			Object: []byte(`{"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},` +
				`"subjects":[{"kind":"ServiceAccount","name":"default","namespace":"probe"}]}`),
		})
		return err
	}
	getSecret := func(cs polyopv1alpha1.ClusterServiceClient) (*polyopv1alpha1.GetResponse, error) {
		return cs.Get(ctx, &polyopv1alpha1.GetRequest{
			Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"},
			Key:  &polyopv1alpha1.ObjectKey{Namespace: ns, Name: "credentials"},
		})
	}
	refused := func(t *testing.T, what string, err error, says ...string) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("%s: %v, want PERMISSION_DENIED", what, err)
		}
		for _, want := range says {
			if !strings.Contains(status.Convert(err).Message(), want) {
				t.Errorf("%s: %q does not say %q", what, status.Convert(err).Message(), want)
			}
		}
	}

	t.Run("if the description does not declare them, then both are refused, saying how to declare them", func(t *testing.T) {
		cs := runHostFor(t, env, configMapSidecar("undeclared", ns))
		refused(t, "creating a ClusterRoleBinding to cluster-admin", createBinding(cs),
			"may not create ClusterRoleBinding.rbac.authorization.k8s.io/v1", "does not declare ClusterRoleBinding", "DescribeResponse.cached_kinds")
		err := k8s.Get(ctx, client.ObjectKey{Name: binding}, &rbacv1.ClusterRoleBinding{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRoleBinding %s after the refusal: %v, want NotFound", binding, err)
		}
		_, err = getSecret(cs)
		refused(t, "reading a Secret", err, `may not get Secret.v1 in namespace "probe"`, "declares them nowhere", "DescribeResponse.cached_kinds")
	})

	t.Run("if the description declares them, then both are served", func(t *testing.T) {
		cs := runHostFor(t, env, configMapSidecar("declared", ns,
			&polyopv1alpha1.CachedKind{Kind: &polyopv1alpha1.GroupVersionKind{Group: rbacv1.GroupName, Version: "v1", Kind: "ClusterRoleBinding"}},
			&polyopv1alpha1.CachedKind{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"}, Namespaces: []string{ns}},
		))
		if err := createBinding(cs); err != nil {
			t.Fatalf("creating a declared ClusterRoleBinding: %v", err)
		}
		t.Cleanup(func() {
			_ = k8s.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: binding}})
		})
		testenv.Eventually(t, time.Minute, "the declared Secret is read from the host's cache", func() (bool, string) {
			resp, err := getSecret(cs)
			if err != nil {
				return false, err.Error()
			}
			return strings.Contains(string(resp.GetObject()), `"name":"credentials"`), string(resp.GetObject())
		})
	})
}
