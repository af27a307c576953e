//go:build !windows

package run

import (
	"fmt"
	"os"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// startLocalControlPlane starts kube-apiserver and etcd from assets, through
// controller-runtime's envtest, with crds installed. It returns the admin
// configuration, a kubeconfig for it and the function that stops it.
func startLocalControlPlane(assets string, crds []*apiextensionsv1.CustomResourceDefinition) (*rest.Config, []byte, func() error, error) {
	testEnv := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: crds, MaxTime: crdWaitTimeout},
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		// A busy machine needs more than envtest's 20 seconds.
		testEnv.ControlPlaneStartTimeout = time.Minute
	}
	config, err := testEnv.Start()
	if err != nil {
		// Start may fail after starting some of the control plane.
		_ = testEnv.Stop()
		return nil, nil, nil, fmt.Errorf("starting the local control plane: %w", err)
	}
	return config, testEnv.KubeConfig, testEnv.Stop, nil
}
