package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// fieldManager is the server-side apply field manager of what the command
// applies itself.
const fieldManager = "polyop-run"

// crdWaitTimeout bounds the wait for installed CRDs to be served.
const crdWaitTimeout = 30 * time.Second

// cluster is the API server the run talks to, and how the host and kubectl
// are pointed at it.
type cluster struct {
	config *rest.Config
	client client.Client

	// namespace is where kubectl puts namespaced objects that name none.
	namespace string

	// kubeconfigArgs point the host and kubectl at the cluster; empty when
	// the environment already does ($KUBECONFIG).
	kubeconfigArgs []string

	// env is set in the environment of every process the run starts.
	env map[string]string

	// kubeconfig is the file to export as KUBECONFIG to reach the cluster,
	// when the run wrote one.
	kubeconfig string

	// assets is the folder of the control-plane binaries (and kubectl).
	assets string

	// testEnv is the local control plane, when the run started one.
	testEnv *envtest.Environment
}

// startCluster connects to the configured cluster, or starts a local control
// plane, installs the example's CRDs and finds kubectl.
func (r *runner) startCluster(ctx context.Context) error {
	crds, err := r.readCRDs()
	if err != nil {
		return err
	}

	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(r.root, "bin", "k8s-"+k8sVersion)
	}
	if assets, err = filepath.Abs(assets); err != nil {
		return err
	}

	if kubeconfig, ok := configuredKubeconfig(r.o.kubeconfig); ok && !r.o.envtest {
		r.cluster, err = r.existingCluster(ctx, kubeconfig, crds)
	} else {
		r.cluster, err = r.localControlPlane(assets, crds)
	}
	if err != nil {
		return err
	}
	r.cluster.assets = assets

	r.kubectl, err = findKubectl(assets, r.cluster.testEnv != nil)
	return err
}

// configuredKubeconfig returns the kubeconfig the user has configured: the
// flag's, else $KUBECONFIG (which may list several files; then "" with true),
// else ~/.kube/config when it exists.
func configuredKubeconfig(flagValue string) (string, bool) {
	if flagValue != "" {
		return flagValue, true
	}
	if env := os.Getenv("KUBECONFIG"); env != "" {
		if filepath.SplitList(env)[0] == env {
			return env, true
		}
		return "", true
	}
	if home, err := os.UserHomeDir(); err == nil {
		path := filepath.Join(home, ".kube", "config")
		if _, err := os.Stat(path); err == nil {
			return path, true
		}
	}
	return "", false
}

// existingCluster connects to a configured cluster and installs the CRDs
// there with server-side apply.
func (r *runner) existingCluster(ctx context.Context, kubeconfig string, crds []*unstructured.Unstructured) (*cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	var args []string
	if kubeconfig != "" {
		abs, err := filepath.Abs(kubeconfig)
		if err != nil {
			return nil, err
		}
		rules.ExplicitPath = abs
		args = []string{"--kubeconfig", abs}
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	config, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	namespace, _, err := loader.Namespace()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	r.console.printf("using the cluster of kubeconfig context %q (%s); pass --envtest for a local one instead", raw.CurrentContext, config.Host)

	c := &cluster{config: config, namespace: namespace, kubeconfigArgs: args, env: map[string]string{}}
	if c.client, err = client.New(config, client.Options{}); err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	typed := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(crds))
	for _, crd := range crds {
		r.console.printf("applying CustomResourceDefinition %s", crd.GetName())
		if err := c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd.DeepCopy()),
			client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("applying CustomResourceDefinition %s: %w", crd.GetName(), err)
		}
		t := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(crd.Object, t); err != nil {
			return nil, fmt.Errorf("reading CustomResourceDefinition %s: %w", crd.GetName(), err)
		}
		typed = append(typed, t)
	}
	if err := envtest.WaitForCRDs(config, typed, envtest.CRDInstallOptions{MaxTime: crdWaitTimeout, PollInterval: 200 * time.Millisecond}); err != nil {
		return nil, fmt.Errorf("waiting for the CRDs to be served: %w", err)
	}
	return c, nil
}

// localControlPlane starts kube-apiserver and etcd from assets with the CRDs
// installed, and writes a kubeconfig for them.
func (r *runner) localControlPlane(assets string, crds []*unstructured.Unstructured) (*cluster, error) {
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("no kube-apiserver in %s: run make envtest (or set KUBEBUILDER_ASSETS)", assets)
	}
	typed := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(crds))
	for _, crd := range crds {
		t := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(crd.Object, t); err != nil {
			return nil, fmt.Errorf("reading CustomResourceDefinition %s: %w", crd.GetName(), err)
		}
		typed = append(typed, t)
	}

	r.console.printf("starting a local control plane (kube-apiserver and etcd from %s)", assets)
	testEnv := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: typed, MaxTime: crdWaitTimeout},
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		// A busy machine needs more than envtest's 20 seconds.
		testEnv.ControlPlaneStartTimeout = time.Minute
	}
	config, err := testEnv.Start()
	if err != nil {
		// Start may fail after starting some of the control plane.
		_ = testEnv.Stop()
		return nil, fmt.Errorf("starting the local control plane: %w", err)
	}
	c := &cluster{config: config, namespace: "default", testEnv: testEnv}

	c.kubeconfig = filepath.Join(r.binDir, "run", "kubeconfig")
	if err := os.MkdirAll(filepath.Dir(c.kubeconfig), 0o755); err != nil {
		return c, err
	}
	if err := os.WriteFile(c.kubeconfig, testEnv.KubeConfig, 0o600); err != nil {
		return c, fmt.Errorf("writing the kubeconfig: %w", err)
	}
	c.kubeconfigArgs = []string{"--kubeconfig", c.kubeconfig}
	c.env = map[string]string{"KUBECONFIG": c.kubeconfig}
	r.console.printf("the local control plane is up at %s; to use it:", config.Host)
	r.console.printf("  export KUBECONFIG=%s", c.kubeconfig)

	if c.client, err = client.New(config, client.Options{}); err != nil {
		return c, fmt.Errorf("connecting to the local control plane: %w", err)
	}
	return c, nil
}

// stop stops the local control plane, if the run started one, and removes
// its kubeconfig.
func (c *cluster) stop() error {
	if c.testEnv == nil {
		return nil
	}
	var errs []error
	if err := c.testEnv.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("stopping the local control plane: %w", err))
	}
	if c.kubeconfig != "" {
		if err := os.Remove(c.kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// findKubectl returns the kubectl next to the control-plane binaries or,
// for a cluster of the user's own, the one on PATH.
func findKubectl(assets string, local bool) (string, error) {
	path := filepath.Join(assets, "kubectl")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if !local {
		if path, err := exec.LookPath("kubectl"); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("no kubectl in %s: run make envtest", assets)
}

// readCRDs reads the example's CustomResourceDefinitions from config/crd
// and the folders below it.
func (r *runner) readCRDs() ([]*unstructured.Unstructured, error) {
	dir := filepath.Join(r.example, "config", "crd")
	files, err := manifestFiles(dir, true)
	if err != nil {
		return nil, err
	}
	objs, err := readObjects(files)
	if err != nil {
		return nil, err
	}
	var crds []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GroupVersionKind().GroupKind() == apiextensionsv1.Kind("CustomResourceDefinition") {
			crds = append(crds, obj)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinitions in %s: run make generate", dir)
	}
	return crds, nil
}
