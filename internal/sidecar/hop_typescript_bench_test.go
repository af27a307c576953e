package sidecar_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/polyop/polyop/internal/testenv"
)

// BenchmarkHopTypeScript measures the Reconcile hop to a sidecar written with
// the TypeScript SDK (testdata/hop_sidecar.mjs, run by node; see make
// node_modules) beside the same hop to the Go SDK; see benchForeignHop.
func BenchmarkHopTypeScript(b *testing.B) {
	err := testenv.BuildTypeScript("sdk/typescript")
	if errors.Is(err, testenv.ErrNoNode) {
		b.Skipf("cannot run the TypeScript sidecar: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		b.Fatal(err)
	}
	benchForeignHop(b, "typescript", node, filepath.Join("testdata", "hop_sidecar.mjs"))
}
