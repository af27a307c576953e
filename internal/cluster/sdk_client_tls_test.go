package cluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	testcerts "github.com/polyop/polyop/internal/testenv/certs"
	polyopclient "github.com/polyop/polyop/sdk/go/client"
)

// The Go SDK's client against this service with the TLS the host serves it
// with (--cluster-tls-*). These tests live with the service rather than in the
// SDK's module, which imports nothing of the host's.

// serveSDKMutualTLS serves the test server (with its cached ConfigMap
// cached/a) on a loopback TCP port with mutual TLS, and returns its address.
func serveSDKMutualTLS(t *testing.T, m testcerts.MutualTLS) string {
	t.Helper()
	cfg, err := MutualTLS(m.ServerCertFile, m.ServerKeyFile, m.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newTestServer(t)
	s.opts.TLS = cfg
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done }) //nolint:errcheck // waits for Start to return; its error on cancellation says nothing.
	return "tcp://" + s.lis.Addr().String()
}

// getCached reads the ConfigMap cached/a through an SDK client of opts, with
// a deadline.
func getCached(t *testing.T, opts polyopclient.Options) error {
	t.Helper()
	c, err := polyopclient.New(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Get(ctx, ctrlclient.ObjectKey{Namespace: "cached", Name: "a"}, &corev1.ConfigMap{})
}

func TestTheSDKClientDialsTheClusterServiceWithMutualTLSFromTheEnvironment(t *testing.T) {
	m := testcerts.NewMutualTLS(t)
	address := serveSDKMutualTLS(t, m)

	t.Setenv(polyopclient.TLSCAFileEnv, m.CAFile)
	t.Setenv(polyopclient.TLSCertFileEnv, m.ClientCertFile)
	t.Setenv(polyopclient.TLSKeyFileEnv, m.ClientKeyFile)
	if err := getCached(t, polyopclient.Options{Address: address}); err != nil {
		t.Errorf("with the CA and a client certificate: %v", err)
	}

	t.Setenv(polyopclient.TLSCertFileEnv, "")
	t.Setenv(polyopclient.TLSKeyFileEnv, "")
	if err := getCached(t, polyopclient.Options{Address: address}); err == nil {
		t.Error("without a client certificate, the host's mutual TLS let the call through")
	}

	t.Setenv(polyopclient.TLSCAFileEnv, "")
	if err := getCached(t, polyopclient.Options{Address: address}); err == nil {
		t.Error("in plain text, the call went through")
	}

	t.Setenv(polyopclient.TLSCertFileEnv, m.ClientCertFile)
	if _, err := polyopclient.New(polyopclient.Options{Address: address}); err == nil {
		t.Errorf("%s without %s: no error", polyopclient.TLSCertFileEnv, polyopclient.TLSCAFileEnv)
	}
}

func TestTheSDKClientDialsTheClusterServiceWithMutualTLSFromOptions(t *testing.T) {
	t.Parallel()
	m := testcerts.NewMutualTLS(t)
	address := serveSDKMutualTLS(t, m)

	cfg, err := polyopclient.TLSConfig(m.CAFile, m.ClientCertFile, m.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := getCached(t, polyopclient.Options{Address: address, TLS: cfg}); err != nil {
		t.Errorf("with the CA and a client certificate: %v", err)
	}

	other, err := polyopclient.TLSConfig(m.OtherCAFile, m.ClientCertFile, m.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := getCached(t, polyopclient.Options{Address: address, TLS: other}); err == nil {
		t.Error("trusting another CA than the host's, the call went through")
	}
}
