package cluster

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	testcerts "github.com/polyop/polyop/internal/testenv/certs"
	polyopclient "github.com/polyop/polyop/sdk/go/client"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func TestListenRefusesPlainTextOnTheNetwork(t *testing.T) {
	t.Parallel()
	for address, want := range map[string]error{
		"tcp://0.0.0.0:0":   ErrPlaintext,
		"tcp://:0":          ErrPlaintext,
		"[::]:0":            ErrPlaintext,
		"tcp://127.0.0.1:0": nil,
		"localhost:0":       nil,
	} {
		s, _ := newTestServer(t)
		err := s.Listen(address)
		if !errors.Is(err, want) {
			t.Errorf("Listen(%q) = %v, want %v", address, err, want)
		}
		if err == nil {
			_ = s.lis.Close()
		}
	}
}

func TestTheClusterServiceServesMutualTLS(t *testing.T) {
	t.Parallel()
	m := testcerts.NewMutualTLS(t)
	cfg, err := MutualTLS(m.ServerCertFile, m.ServerKeyFile, m.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newTestServer(t)
	s.opts.TLS = cfg
	// Every interface: allowed with TLS.
	if err := s.Listen("tcp://:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done }) //nolint:errcheck // waits for Start to return; its error on cancellation says nothing.

	_, port, err := net.SplitHostPort(s.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	target, err := polyopclient.Target("127.0.0.1:" + port)
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(creds grpc.DialOption) error {
		conn, err := grpc.NewClient(target, creds)
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = polyopv1alpha1.NewClusterServiceClient(conn).ResolveKind(ctx, &polyopv1alpha1.ResolveKindRequest{Kind: configMap})
		return err
	}
	withCert, err := polyopclient.TLSConfig(m.CAFile, m.ClientCertFile, m.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := resolve(grpc.WithTransportCredentials(credentials.NewTLS(withCert))); err != nil {
		t.Errorf("with a client certificate the CA signed: %v", err)
	}
	withoutCert, err := polyopclient.TLSConfig(m.CAFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := resolve(grpc.WithTransportCredentials(credentials.NewTLS(withoutCert))); err == nil {
		t.Error("without a client certificate, the call went through")
	}
	if err := resolve(grpc.WithTransportCredentials(insecure.NewCredentials())); err == nil {
		t.Error("in plain text, the call went through")
	}
}

func TestMutualTLSRefusesFilesItCannotLoad(t *testing.T) {
	t.Parallel()
	m := testcerts.NewMutualTLS(t)
	for name, files := range map[string][3]string{
		"a missing certificate": {"/nonexistent.crt", m.ServerKeyFile, m.CAFile},
		"a key of another":      {m.ServerCertFile, m.ClientKeyFile, m.CAFile},
		"a missing client CA":   {m.ServerCertFile, m.ServerKeyFile, "/nonexistent.crt"},
		"a client CA not PEM":   {m.ServerCertFile, m.ServerKeyFile, m.ServerKeyFile},
	} {
		if _, err := MutualTLS(files[0], files[1], files[2]); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
