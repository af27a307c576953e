package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// The environment variables that configure TLS to the Cluster service, for a
// host serving it on TCP with --cluster-tls-cert-file, --cluster-tls-key-file
// and --cluster-tls-client-ca-file. The Python and TypeScript SDKs read the
// same variables.
const (
	// TLSCAFileEnv names the PEM file of the CA that signed the host's
	// certificate. Setting it turns TLS on.
	TLSCAFileEnv = "POLYOP_CLUSTER_TLS_CA_FILE"
	// TLSCertFileEnv names the PEM file of the client certificate the sidecar
	// presents, signed by the CA of the host's --cluster-tls-client-ca-file.
	TLSCertFileEnv = "POLYOP_CLUSTER_TLS_CERT_FILE"
	// TLSKeyFileEnv names the PEM file of the client certificate's key.
	TLSKeyFileEnv = "POLYOP_CLUSTER_TLS_KEY_FILE"
)

// TLSConfig is the TLS configuration of a Client that verifies the host's
// certificate against the CA in caFile and presents the client certificate in
// certFile and keyFile (both empty: none, for a host that does not ask for
// one). The host's name is checked against the address dialed.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("polyop client: the Cluster service's CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("polyop client: the Cluster service's CA: %s holds no PEM certificate", caFile)
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("polyop client: the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case certFile != "" || keyFile != "":
		return nil, errors.New("polyop client: a client certificate needs both its certificate and its key file")
	}
	return cfg, nil
}

// TLSConfigFromEnv is TLSConfig of the files POLYOP_CLUSTER_TLS_CA_FILE,
// POLYOP_CLUSTER_TLS_CERT_FILE and POLYOP_CLUSTER_TLS_KEY_FILE name, or nil
// (plain text) when POLYOP_CLUSTER_TLS_CA_FILE is not set.
func TLSConfigFromEnv() (*tls.Config, error) {
	ca := os.Getenv(TLSCAFileEnv)
	if ca == "" {
		if os.Getenv(TLSCertFileEnv) != "" || os.Getenv(TLSKeyFileEnv) != "" {
			return nil, fmt.Errorf("polyop client: %s and %s are set but %s is not: TLS needs the CA that signed the host's certificate", TLSCertFileEnv, TLSKeyFileEnv, TLSCAFileEnv)
		}
		return nil, nil
	}
	return TLSConfig(ca, os.Getenv(TLSCertFileEnv), os.Getenv(TLSKeyFileEnv))
}

// transportCredentials are TLS with cfg, or plain text when cfg is nil.
func transportCredentials(cfg *tls.Config) grpc.DialOption {
	if cfg == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg))
}

// DialOption is the transport credentials of a connection to the Cluster
// service: TLS as TLSConfigFromEnv configures it, else plain text. A sidecar
// that dials the Cluster service itself passes it to grpc.NewClient.
func DialOption() (grpc.DialOption, error) {
	cfg, err := TLSConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return transportCredentials(cfg), nil
}
