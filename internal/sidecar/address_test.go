package sidecar

import (
	"strings"
	"testing"
)

// The address forms themselves are tested in the SDK's address package;
// these tests cover what Target adds to it: the passthrough resolver and
// errors that say they are about the sidecar's address.
func TestTarget(t *testing.T) {
	t.Parallel()
	got, err := Target("tcp://127.0.0.1:9000")
	if err != nil || got != "passthrough:///127.0.0.1:9000" {
		t.Errorf("Target(tcp://127.0.0.1:9000) = %q, %v; want passthrough:///127.0.0.1:9000", got, err)
	}
	if _, err := Target("http://localhost:9000"); err == nil || !strings.HasPrefix(err.Error(), "sidecar ") {
		t.Errorf("Target(http://localhost:9000) error = %v, want one that starts with \"sidecar \"", err)
	}
}
