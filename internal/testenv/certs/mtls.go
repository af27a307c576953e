package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// MutualTLS are the PEM files of a throwaway CA, a server certificate it
// signed for 127.0.0.1, ::1 and localhost, and a client certificate it signed:
// what a test of mutual TLS needs on both sides.
type MutualTLS struct {
	// CAFile is the CA's certificate: the server's client CA, the client's
	// root.
	CAFile string
	// ServerCertFile and ServerKeyFile are the server's certificate and key.
	ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile are the client's certificate and key.
	ClientCertFile, ClientKeyFile string
	// OtherCAFile is a second CA's certificate, which signed neither: a client
	// or server trusting it alone must fail the handshake.
	OtherCAFile string
}

// NewMutualTLS writes a MutualTLS into a temporary directory of t, valid for
// an hour.
func NewMutualTLS(t testing.TB) MutualTLS {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	keyDER := func(key *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	serial := int64(1)
	now := time.Now()
	sign := func(tmpl *x509.Certificate, key *ecdsa.PrivateKey, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Minute), now.Add(time.Hour)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return cert, der
	}
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key := newKey()
		cert, der := sign(&x509.Certificate{
			Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}, key, nil, nil)
		return cert, key, der
	}

	var m MutualTLS
	ca, caKey, caDER := newCA("polyop test CA")
	m.CAFile = write("ca.crt", "CERTIFICATE", caDER)
	_, _, otherDER := newCA("polyop other CA")
	m.OtherCAFile = write("other-ca.crt", "CERTIFICATE", otherDER)

	serverKey := newKey()
	_, serverDER := sign(&x509.Certificate{
		Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, serverKey, ca, caKey)
	m.ServerCertFile = write("server.crt", "CERTIFICATE", serverDER)
	m.ServerKeyFile = write("server.key", "PRIVATE KEY", keyDER(serverKey))

	clientKey := newKey()
	_, clientDER := sign(&x509.Certificate{
		Subject:  pkix.Name{CommonName: "polyop sidecar"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, clientKey, ca, caKey)
	m.ClientCertFile = write("client.crt", "CERTIFICATE", clientDER)
	m.ClientKeyFile = write("client.key", "PRIVATE KEY", keyDER(clientKey))
	return m
}
