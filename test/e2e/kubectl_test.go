package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// kubectl runs the real kubectl binary against the test control plane.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(env.Kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// exampleCRD is a CRD that tests apply with kubectl, as a user would, once
// per test binary.
type exampleCRD struct {
	dir  string // the folder holding the CRD's YAML
	name string // the CRD's name, <plural>.<group>
	once sync.Once
	err  error
}

// install applies the CRD, the first time it is called, and waits until the
// API server serves it.
func (c *exampleCRD) install(t *testing.T) {
	t.Helper()
	c.once.Do(func() {
		if out, err := kubectl(t, "apply", "--server-side", "-f", c.dir); err != nil {
			c.err = fmt.Errorf("kubectl apply %s: %w\n%s", c.dir, err, out)
			return
		}
		if out, err := kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+c.name); err != nil {
			c.err = fmt.Errorf("the CRD %s is not established: %w\n%s", c.name, err, out)
		}
	})
	if c.err != nil {
		t.Fatal(c.err)
	}
}
