package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// kubectl runs the real kubectl binary against the test control plane.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(env.Kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
