package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memcachedv1 "github.com/polyop/polyop/examples/go/memcached/api/v1"
	websitev1 "github.com/polyop/polyop/examples/go/website/api/v1"
	"github.com/polyop/polyop/internal/testenv"
)

var (
	env    *testenv.Env
	k8s    client.Client
	scheme = runtime.NewScheme()

	hostBin, memcachedBin, websiteBin, finalizeBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, memcachedv1.AddToScheme, websitev1.AddToScheme} {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	var err error
	env, err = testenv.Start(
		filepath.Join(testenv.RepoRoot(), "examples", "go", "memcached", "config", "crd"),
		filepath.Join(testenv.RepoRoot(), "examples", "go", "website", "config", "crd"),
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

	if k8s, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for pkg, dst := range map[string]*string{
		"./cmd/host":                         &hostBin,
		"./examples/go/memcached":            &memcachedBin,
		"./examples/go/website":              &websiteBin,
		"./test/conformance/finalizesidecar": &finalizeBin,
	} {
		if *dst, err = testenv.Build(pkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}
