package client_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyop/polyop/sdk/go/client"
)

// The client against the host's Cluster service with mutual TLS is tested
// with the service, in the host's module (internal/cluster): the
// certificates come from the host's test environment. These are the cases
// that need no certificate.

func TestTLSConfigFromEnvWithoutTheCA(t *testing.T) {
	t.Setenv(client.TLSCAFileEnv, "")
	t.Setenv(client.TLSCertFileEnv, "")
	t.Setenv(client.TLSKeyFileEnv, "")
	if cfg, err := client.TLSConfigFromEnv(); cfg != nil || err != nil {
		t.Errorf("with no variable set: %v, %v; want plain text (nil, nil)", cfg, err)
	}

	t.Setenv(client.TLSCertFileEnv, "/certs/tls.crt")
	t.Setenv(client.TLSKeyFileEnv, "/certs/tls.key")
	_, err := client.TLSConfigFromEnv()
	if err == nil || !strings.Contains(err.Error(), client.TLSCAFileEnv) {
		t.Errorf("a client certificate without the CA: %v, want an error naming %s", err, client.TLSCAFileEnv)
	}
}

func TestTLSConfigNamesTheFileItCannotRead(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "ca.crt")
	_, err := client.TLSConfig(missing, "", "")
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("TLSConfig with a missing CA file: %v, want an error naming it", err)
	}
}
