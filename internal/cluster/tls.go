package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrPlaintext is the error of Listen on a TCP address other than loopback
// without TLS: the cluster service reads and writes with the host's
// credentials, so whoever reaches it in plain text would have them.
var ErrPlaintext = errors.New("the cluster service serves the host's credentials: on a TCP address other than loopback it needs TLS with client authentication")

// MutualTLS is the TLS configuration of a cluster service that requires
// client certificates signed by the CA in clientCAFile, and serves the
// certificate and key in certFile and keyFile. The files are read again at
// every handshake (a sidecar makes few), so certificates renewed in place,
// as cert-manager renews a mounted Secret, are taken up without a restart.
// It fails at once when a file cannot be read or parsed.
func MutualTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	load := func() (*tls.Config, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the cluster service's certificate: %w", err)
		}
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("loading the cluster service's client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("loading the cluster service's client CA: %s holds no PEM certificate", clientCAFile)
		}
		return &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2"},
		}, nil
	}
	if _, err := load(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ClientAuth:         tls.RequireAndVerifyClientCert,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return load() },
	}, nil
}
