package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

var (
	env *testenv.Env
	k8s client.Client

	hostBin, testSidecarBin, exampleSidecarBin string
)

// crdDirs are the CRDs of the suite's control plane, and of any other a test
// starts.
var crdDirs = []string{
	filepath.Join(testenv.RepoRoot(), "examples", "go", "maintenancewindow", "config", "crd"),
	filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "crd"),
}

func TestMain(m *testing.M) {
	os.Exit(testenv.Suite{
		CRDDirs: crdDirs,
		Binaries: map[string]*string{
			"./cmd/host":                      &hostBin,
			"./test/testsidecar":              &testSidecarBin,
			"./examples/go/maintenancewindow": &exampleSidecarBin,
		},
		// Server-mode sharding lists and watches by shard selector.
		FeatureGates: []string{"ShardedListAndWatch"},
		// The fencing tests read the writes of their replicas' users.
		AuditUsers: auditUsers(),
		Env:        &env,
		Client:     &k8s,
	}.Run(m))
}
