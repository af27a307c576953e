package certs_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/certs"
)

func TestServingCertIsTrustedThroughTheCA(t *testing.T) {
	t.Parallel()
	ca, err := certs.NewCA("test-ca", certs.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	hosts := certs.ServiceHosts("web", "ops", "127.0.0.1")
	serving, err := certs.NewServingCert(ca, hosts, certs.ServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(serving.Cert, serving.Key)
	if err != nil {
		t.Fatalf("the serving pair does not load: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.Cert) {
		t.Fatal("the CA is not PEM")
	}
	for _, host := range []string{"web.ops.svc", "web.ops.svc.cluster.local", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.ops.svc", Roots: pool}); err == nil {
		t.Error("the certificate covers a host it was not made for")
	}
}

func TestServingCertProblem(t *testing.T) {
	t.Parallel()
	ca, _ := certs.NewCA("ca", certs.CAValidity)
	other, _ := certs.NewCA("other", certs.CAValidity)
	hosts := []string{"web.ops.svc"}
	serving, _ := certs.NewServingCert(ca, hosts, certs.ServingValidity)
	now := time.Now()
	for name, tc := range map[string]struct {
		ca      certs.KeyPair
		hosts   []string
		now     time.Time
		problem bool
	}{
		"if the certificate is fresh and covers the hosts, then there is no problem": {ca: ca, hosts: hosts, now: now},
		"if it expires within the renewal window, then it is renewed":                {ca: ca, hosts: hosts, now: now.Add(340 * 24 * time.Hour), problem: true},
		"if a host is missing, then it is renewed":                                   {ca: ca, hosts: []string{"web.ops.svc", "127.0.0.1"}, now: now, problem: true},
		"if another CA signed it, then it is renewed":                                {ca: other, hosts: hosts, now: now, problem: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := certs.ServingCertProblem(tc.ca, serving, tc.hosts, tc.now, certs.RenewBefore)
			if (got != "") != tc.problem {
				t.Errorf("problem %q, want one: %v", got, tc.problem)
			}
		})
	}
	if p := certs.CAProblem(certs.KeyPair{}, now); p == "" {
		t.Error("an empty CA has no problem")
	}
}

func TestEnsureFiles(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "serving-certs")
	files := certs.Files{Dir: dir}
	made, err := certs.EnsureFiles(files, []string{"localhost", "127.0.0.1"})
	if err != nil || !made {
		t.Fatalf("EnsureFiles in an empty dir: made %v, %v", made, err)
	}
	serving, ca, err := files.Read()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(serving.Cert, serving.Key); err != nil {
		t.Errorf("tls.crt and tls.key do not match: %v", err)
	}
	if block, _ := pem.Decode(ca); block == nil {
		t.Error("no ca.crt")
	}
	info, err := os.Stat(filepath.Join(dir, "tls.key"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("tls.key: %v, mode %v", err, info.Mode())
	}
	// A certificate already there is left alone.
	made, err = certs.EnsureFiles(files, []string{"other"})
	if err != nil || made {
		t.Errorf("EnsureFiles with a certificate: made %v, %v", made, err)
	}
	again, _, _ := files.Read()
	if !bytes.Equal(again.Cert, serving.Cert) {
		t.Error("the certificate changed")
	}
}
