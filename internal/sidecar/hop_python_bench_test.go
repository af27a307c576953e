package sidecar_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/polyop/polyop/internal/testenv"
)

// BenchmarkHopPython measures the Reconcile hop to a sidecar written with the
// Python SDK (testdata/hop_sidecar.py, run by the virtualenv's Python, see
// make .venv) beside the same hop to the Go SDK; see benchForeignHop.
func BenchmarkHopPython(b *testing.B) {
	py := filepath.Join(testenv.RepoRoot(), ".venv", "bin", "python")
	if out, err := exec.Command(py, "-c", "import polyop").CombinedOutput(); err != nil {
		b.Skipf("no Python virtualenv with the polyop SDK (run make .venv): %v\n%s", err, out)
	}
	benchForeignHop(b, "python", py, filepath.Join("testdata", "hop_sidecar.py"))
}
