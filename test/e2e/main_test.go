package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

var (
	env *testenv.Env
	k8s client.Client

	hostBin, testSidecarBin, exampleSidecarBin, childSidecarBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	env, err = testenv.Start(
		filepath.Join(testenv.RepoRoot(), "examples", "go", "maintenancewindow", "config", "crd"),
		filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "crd"),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	defer testenv.CleanBuilds()

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	if k8s, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for pkg, dst := range map[string]*string{
		"./cmd/host":                      &hostBin,
		"./test/testsidecar":              &testSidecarBin,
		"./examples/go/maintenancewindow": &exampleSidecarBin,
		"./test/childsidecar":             &childSidecarBin,
	} {
		if *dst, err = testenv.Build(pkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}
