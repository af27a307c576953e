package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunReconcilesTheSample runs the command end to end, as `make run` does,
// on a local control plane: it builds the host and the example's sidecar,
// applies the samples and must see them Ready.
func TestRunReconcilesTheSample(t *testing.T) {
	t.Parallel()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run make test (or make envtest)")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // the built binaries and the kubeconfig

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	bin := filepath.Join(t.TempDir(), "run")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/run: %v\n%s", err, out)
	}

	// --envtest: never touch a cluster the machine happens to be configured for.
	cmd := exec.CommandContext(ctx, bin, "--envtest", "--exit-when-reconciled", "--timeout", "2m", "--bin-dir", dir)
	cmd.Dir = root
	cmd.WaitDelay = time.Minute
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("output of run:\n%s", out.String())
	if err != nil {
		t.Fatalf("run failed: %v", err)
	}
	for _, want := range []string{"is Ready", "Ready", "status of "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output does not contain %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "run", "kubeconfig")); err == nil {
		t.Error("the local control plane's kubeconfig was left behind")
	}
}
