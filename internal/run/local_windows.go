package run

import (
	"errors"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
)

// startLocalControlPlane: controller-runtime's envtest, which starts the
// local control plane, does not build on Windows.
func startLocalControlPlane(string, []*apiextensionsv1.CustomResourceDefinition) (*rest.Config, []byte, func() error, error) {
	return nil, nil, nil, errors.New("polyop run starts a local control plane on Linux and macOS only: pass --kubeconfig (or set KUBECONFIG) to run against a cluster")
}
