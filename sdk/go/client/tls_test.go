package client_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterservice "github.com/polyop/polyop/internal/cluster"
	"github.com/polyop/polyop/internal/testenv"
	"github.com/polyop/polyop/sdk/go/client"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// serveMutualTLS serves a fakeCluster holding a ConfigMap default/settings on
// a loopback TCP port with the TLS the host serves its Cluster service with
// (--cluster-tls-*), and returns its address.
func serveMutualTLS(t *testing.T, m testenv.MutualTLS) string {
	t.Helper()
	f := &fakeCluster{
		store: fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
			WithObjects(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}).Build(),
		mapper: testrestmapper.TestOnlyStaticRESTMapper(clientgoscheme.Scheme),
		source: polyopv1alpha1.ReadSource_READ_SOURCE_CACHE,
	}
	cfg, err := clusterservice.MutualTLS(m.ServerCertFile, m.ServerKeyFile, m.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	polyopv1alpha1.RegisterClusterServiceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return "tcp://" + lis.Addr().String()
}

// getSettings reads the ConfigMap through a Client of opts, with a deadline.
func getSettings(t *testing.T, opts client.Options) error {
	t.Helper()
	c, err := client.New(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Get(ctx, ctrlclient.ObjectKey{Namespace: "default", Name: "settings"}, &corev1.ConfigMap{})
}

func TestTheClientDialsTheClusterServiceWithMutualTLSFromTheEnvironment(t *testing.T) {
	m := testenv.NewMutualTLS(t)
	address := serveMutualTLS(t, m)

	t.Setenv(client.TLSCAFileEnv, m.CAFile)
	t.Setenv(client.TLSCertFileEnv, m.ClientCertFile)
	t.Setenv(client.TLSKeyFileEnv, m.ClientKeyFile)
	if err := getSettings(t, client.Options{Address: address}); err != nil {
		t.Errorf("with the CA and a client certificate: %v", err)
	}

	t.Setenv(client.TLSCertFileEnv, "")
	t.Setenv(client.TLSKeyFileEnv, "")
	if err := getSettings(t, client.Options{Address: address}); err == nil {
		t.Error("without a client certificate, the host's mutual TLS let the call through")
	}

	t.Setenv(client.TLSCAFileEnv, "")
	if err := getSettings(t, client.Options{Address: address}); err == nil {
		t.Error("in plain text, the call went through")
	}

	t.Setenv(client.TLSCertFileEnv, m.ClientCertFile)
	if _, err := client.New(client.Options{Address: address}); err == nil {
		t.Errorf("%s without %s: no error", client.TLSCertFileEnv, client.TLSCAFileEnv)
	}
}

func TestTheClientDialsTheClusterServiceWithMutualTLSFromOptions(t *testing.T) {
	t.Parallel()
	m := testenv.NewMutualTLS(t)
	address := serveMutualTLS(t, m)

	cfg, err := client.TLSConfig(m.CAFile, m.ClientCertFile, m.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := getSettings(t, client.Options{Address: address, TLS: cfg}); err != nil {
		t.Errorf("with the CA and a client certificate: %v", err)
	}

	other, err := client.TLSConfig(m.OtherCAFile, m.ClientCertFile, m.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := getSettings(t, client.Options{Address: address, TLS: other}); err == nil {
		t.Error("trusting another CA than the host's, the call went through")
	}
}
