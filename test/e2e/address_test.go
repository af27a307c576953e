package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyop/polyop/internal/testenv"
)

// TestARelativeClusterAddressReachesASidecarInAnotherDirectory starts the
// host in one directory with a relative --cluster-address and the sidecar in
// another, with a relative address of its own: the host announces its
// Cluster service at an absolute path, so the sidecar's Cluster calls reach
// it (before, the sidecar dialed the relative path from its own directory and
// every call failed with "no such file or directory").
func TestARelativeClusterAddressReachesASidecarInAnotherDirectory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hostDir, err := os.MkdirTemp("", "po-host-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(hostDir) })
	start := func(name, bin, dir string, args ...string) {
		p, err := testenv.StartProcessWith(name, bin, args, testenv.ProcessOptions{Logger: t, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
	}
	// The sidecar runs in the fixture's directory, the host in another.
	start("sidecar", testSidecarBin, filepath.Dir(f.socket), "children", "--address", f.address(), "--log-file", f.callLog)
	start("host", hostBin, hostDir,
		"--kubeconfig", env.Kubeconfig,
		"--sidecar-address", f.address(),
		"--cluster-address", "unix:run/cluster.sock",
		"--namespace", f.ns,
		"--health-probe-bind-address", "0",
		"--metrics-bind-address", "0",
		"--webhook-port", "0",
	)

	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "settings"}, Data: map[string]string{"value": "hi"}})
	f.createWidget("w", map[string]any{"configMapName": "settings"})
	testenv.Eventually(f.t, 60*time.Second, "the sidecar reads the ConfigMap through the host's Cluster service", func() (bool, string) {
		u := f.getWidget("w")
		return statusString(u, "configMapValue") == "hi", fmt.Sprint(u.Object["status"])
	})
	if _, err := os.Stat(filepath.Join(hostDir, "run", "cluster.sock")); err != nil {
		t.Errorf("the Cluster service's socket is not in the host's directory: %v", err)
	}
}
