package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Validity of what NewCA and NewServingCert make, and how long before a
// serving certificate expires it is renewed.
const (
	CAValidity      = 10 * 365 * 24 * time.Hour
	ServingValidity = 365 * 24 * time.Hour
	RenewBefore     = 30 * 24 * time.Hour
)

// KeyPair is a certificate and its private key, PEM-encoded.
type KeyPair struct {
	Cert []byte
	Key  []byte
}

// NewCA makes a self-signed CA named commonName, valid for validity from now.
func NewCA(commonName string, validity time.Duration) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"polyop"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("making the CA certificate: %w", err)
	}
	return encode(der, key)
}

// NewServingCert makes a TLS serving certificate for hosts (DNS names and IP
// addresses), signed by ca and valid for validity from now (never beyond the
// CA).
func NewServingCert(ca KeyPair, hosts []string, validity time.Duration) (KeyPair, error) {
	if len(hosts) == 0 {
		return KeyPair{}, errors.New("a serving certificate needs at least one host")
	}
	caCert, caKey, err := ca.parse()
	if err != nil {
		return KeyPair{}, fmt.Errorf("the CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0], Organization: []string{"polyop"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return KeyPair{}, fmt.Errorf("making the serving certificate: %w", err)
	}
	return encode(der, key)
}

// ServingCertProblem says why the serving certificate must be renewed: it does
// not parse, is not signed by ca, does not cover every host, or expires within
// renewBefore of now. It returns "" when the certificate is fine.
func ServingCertProblem(ca, serving KeyPair, hosts []string, now time.Time, renewBefore time.Duration) string {
	caCert, _, err := ca.parse()
	if err != nil {
		return "the CA does not parse: " + err.Error()
	}
	cert, _, err := serving.parse()
	if err != nil {
		return "the serving certificate does not parse: " + err.Error()
	}
	if err := cert.CheckSignatureFrom(caCert); err != nil {
		return "the serving certificate is not signed by the CA"
	}
	if now.Add(renewBefore).After(cert.NotAfter) {
		return fmt.Sprintf("the serving certificate expires at %s", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	for _, h := range hosts {
		if err := cert.VerifyHostname(h); err != nil {
			return fmt.Sprintf("the serving certificate does not cover %s", h)
		}
	}
	return ""
}

// CAProblem says why the CA must be replaced: it does not parse, or expires
// within twice the serving certificates' validity. It returns "" when the CA
// is fine.
func CAProblem(ca KeyPair, now time.Time) string {
	cert, _, err := ca.parse()
	if err != nil {
		return "the CA does not parse: " + err.Error()
	}
	if !cert.IsCA {
		return "the CA certificate is not a CA"
	}
	if now.Add(2 * ServingValidity).After(cert.NotAfter) {
		return fmt.Sprintf("the CA expires at %s", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}

// parse decodes the pair.
func (p KeyPair) parse() (*x509.Certificate, crypto.Signer, error) {
	block, _ := pem.Decode(p.Cert)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	kblock, _ := pem.Decode(p.Key)
	if kblock == nil {
		return nil, nil, errors.New("no PEM private key")
	}
	key, err := parseKey(kblock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func parseKey(der []byte) (crypto.Signer, error) {
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("the private key does not parse: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("the private key (%T) cannot sign", k)
	}
	return signer, nil
}

func encode(der []byte, key *ecdsa.PrivateKey) (KeyPair, error) {
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// ServiceHosts are the DNS names a Service is reached by from inside the
// cluster, the fully qualified one first, followed by extra, without
// duplicates.
func ServiceHosts(service, namespace string, extra ...string) []string {
	var hosts []string
	if service != "" && namespace != "" {
		hosts = append(hosts,
			fmt.Sprintf("%s.%s.svc", service, namespace),
			fmt.Sprintf("%s.%s.svc.cluster.local", service, namespace),
			fmt.Sprintf("%s.%s", service, namespace),
			service,
		)
	}
	for _, h := range extra {
		if h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}
