package conformance

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memcachedv1 "github.com/polyop/polyop/examples/go/memcached/api/v1"
	websitev1 "github.com/polyop/polyop/examples/go/website/api/v1"
	"github.com/polyop/polyop/internal/testenv"
	conformancev1 "github.com/polyop/polyop/test/conformance/indexsidecar/api/v1"
)

var (
	env *testenv.Env
	k8s client.Client
	// scheme knows the examples' types, for the SDK clients the tests make.
	scheme  = newScheme()
	schemes = []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, memcachedv1.AddToScheme, websitev1.AddToScheme, conformancev1.AddToScheme}

	hostBin, memcachedBin, websiteBin, testSidecarBin, indexBin string
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Suite{
		CRDDirs: []string{
			filepath.Join(testenv.RepoRoot(), "examples", "go", "memcached", "config", "crd"),
			filepath.Join(testenv.RepoRoot(), "examples", "go", "website", "config", "crd"),
			filepath.Join(testenv.RepoRoot(), "test", "conformance", "indexsidecar", "config", "crd"),
		},
		Schemes: schemes,
		Binaries: map[string]*string{
			"./cmd/host":                      &hostBin,
			"./examples/go/memcached":         &memcachedBin,
			"./examples/go/website":           &websiteBin,
			"./test/testsidecar":              &testSidecarBin,
			"./test/conformance/indexsidecar": &indexBin,
		},
		Env:    &env,
		Client: &k8s,
	}.Run(m))
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range schemes {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}
