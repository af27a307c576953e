package deploy

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

var (
	env *testenv.Env
	k8s client.Client

	hostBin, probeBin string
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Suite{
		CRDDirs:  []string{filepath.Join(testenv.RepoRoot(), "test", "deploy", "testdata", "crds")},
		Schemes:  []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme},
		Binaries: map[string]*string{"./cmd/host": &hostBin, "./cmd/probe": &probeBin},
		Env:      &env,
		Client:   &k8s,
	}.Run(m))
}
