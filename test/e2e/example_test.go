package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/testenv"
)

// TestMaintenanceWindowExample runs the example sidecar unchanged and applies
// its sample with kubectl, as a user would.
func TestMaintenanceWindowExample(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.start("sidecar", exampleSidecarBin, "--address", f.address())
	f.startHost()

	samples, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "examples", "go", "maintenancewindow", "config", "samples", "*.yaml"))
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	out, err := kubectl(t, "apply", "-n", f.ns, "-f", samples[0])
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	testenv.Eventually(f.t, 2*time.Minute, "the sample is Ready", func() (bool, string) {
		out, err := kubectl(t, "get", "maintenancewindows", "-n", f.ns, "-o", "jsonpath={range .items[*]}{.status.phase} {.status.conditions[?(@.type==\"Ready\")].status}{end}")
		if err != nil {
			return false, err.Error()
		}
		return out == "Active True" || out == "Pending True", out
	})
	out, _ = kubectl(t, "get", "maintenancewindows", "-n", f.ns, "-o", "wide")
	t.Logf("kubectl get maintenancewindows:\n%s", out)
}
