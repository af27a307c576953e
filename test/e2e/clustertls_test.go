package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
	testcerts "github.com/polyop/polyop/internal/testenv/certs"
	polyopclient "github.com/polyop/polyop/sdk/go/client"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// TestTheClusterServiceOnTheNetworkNeedsMutualTLS runs the host with its
// Cluster service on every interface: without TLS it stops at start, naming
// the flags to set; with them, a client presenting a certificate the client
// CA signed reads through it, and a plain-text client is refused.
func TestTheClusterServiceOnTheNetworkNeedsMutualTLS(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, port, err := net.SplitHostPort(freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	everywhere := "tcp://0.0.0.0:" + port

	plain := f.startHost("--cluster-address", everywhere)
	if code, err := plain.Wait(60 * time.Second); err != nil || code == 0 {
		t.Fatalf("the host with --cluster-address=%s and no TLS: exit code %d, %v; want it to stop at start", everywhere, code, err)
	}
	for _, want := range []string{"--cluster-address=" + everywhere, "--cluster-tls-cert-file", "--cluster-tls-key-file", "--cluster-tls-client-ca-file"} {
		if !strings.Contains(plain.Output(), want) {
			t.Errorf("the host's error does not name %q:\n%s", want, testenv.Tail(plain.Output(), 20))
		}
	}

	m := testcerts.NewMutualTLS(t)
	f.startChildSidecar()
	f.startHost("--cluster-address", everywhere,
		"--cluster-tls-cert-file", m.ServerCertFile, "--cluster-tls-key-file", m.ServerKeyFile, "--cluster-tls-client-ca-file", m.CAFile)
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "settings"}})

	tlsConfig, err := polyopclient.TLSConfig(m.CAFile, m.ClientCertFile, m.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := polyopclient.New(polyopclient.Options{Address: "tcp://127.0.0.1:" + port, TLS: tlsConfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	testenv.Eventually(f.t, 60*time.Second, "a client with a certificate reads through the Cluster service", func() (bool, string) {
		err := c.Get(ctxTimeout(t, 10*time.Second), client.ObjectKey{Namespace: f.ns, Name: "settings"}, &corev1.ConfigMap{})
		return err == nil, errString(err)
	})

	conn, err := grpc.NewClient("passthrough:///127.0.0.1:"+port, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = polyopv1alpha1.NewClusterServiceClient(conn).Get(ctx, &polyopv1alpha1.GetRequest{Kind: configMapKind, Key: &polyopv1alpha1.ObjectKey{Namespace: f.ns, Name: "settings"}})
	if err == nil {
		t.Error("a plain-text client read through the Cluster service")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
