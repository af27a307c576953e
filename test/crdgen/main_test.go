package crdgen

import (
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
)

// TestMain starts a control plane with no CRDs: the tests install the ones
// the generators write.
func TestMain(m *testing.M) {
	os.Exit(testenv.Suite{
		Schemes: []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme},
		Env:     &env,
		Client:  &k8s,
	}.Run(m))
}
