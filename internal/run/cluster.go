package run

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/controlplane"
)

// fieldManager is the server-side apply field manager of what the command
// applies itself.
const fieldManager = "polyop-run"

// crdWaitTimeout bounds the wait for installed CRDs to be served.
const crdWaitTimeout = 30 * time.Second

// runCluster is the API server the run talks to, and how the host and kubectl
// are pointed at it.
type runCluster struct {
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

	// stopLocal stops the local control plane, when the run started one;
	// nil otherwise.
	stopLocal func() error
}

// runScheme holds the kinds polyop run reads and writes as types: the
// built-in ones and CustomResourceDefinitions.
func runScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

// startCluster connects to the configured cluster, or starts a local control
// plane, installs the project's CRDs and finds kubectl.
func (r *runner) startCluster(ctx context.Context) error {
	crds, err := r.readCRDs()
	if err != nil {
		return err
	}
	if kubeconfig, ok := configuredKubeconfig(r.o.Kubeconfig); ok && !r.o.Local {
		if err := missingKubeconfig(kubeconfig, r.o.Kubeconfig != ""); err != nil {
			return err
		}
		c, err := r.existingCluster(ctx, kubeconfig, crds)
		r.setCluster(c)
		if err != nil {
			return err
		}
		if r.o.ApplySamples {
			// kubectl applies the samples; without them it is not needed.
			r.kubectl, err = findKubectl(os.Getenv("KUBEBUILDER_ASSETS"))
		}
		return err
	}
	assets, err := controlplane.Ensure(ctx, controlplane.Installer{IndexURL: r.o.EnvtestIndex, Printf: r.console.printf})
	if err != nil {
		return err
	}
	if assets, err = filepath.Abs(assets); err != nil {
		return err
	}
	c, err := r.localControlPlane(assets, crds)
	r.setCluster(c)
	if err != nil {
		return err
	}
	r.cluster.assets = assets
	r.kubectl, err = findKubectl(assets)
	return err
}

func (r *runner) setCluster(c *runCluster) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cluster = c
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

// missingKubeconfig explains why the configured kubeconfig at path (of the
// --kubeconfig flag when fromFlag, else of $KUBECONFIG) cannot be used when
// it does not exist, naming where it came from: a kubeconfig in a folder
// named as a run's temporary folder is one that an earlier polyop run
// printed for export and removed when it stopped, and a shell may still
// export it. It returns nil when path exists, or is "" (KUBECONFIG lists
// several files, which clientcmd merges).
func missingKubeconfig(path string, fromFlag bool) error {
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	source, remedy := "KUBECONFIG", "unset KUBECONFIG to get a local control plane (or the cluster of ~/.kube/config, when there is one), "+
		"or point KUBECONFIG at your cluster's kubeconfig"
	if fromFlag {
		source, remedy = "--kubeconfig", "pass --local for a local control plane, or point --kubeconfig at your cluster's kubeconfig"
	}
	if filepath.Base(path) == "kubeconfig" && strings.HasPrefix(filepath.Base(filepath.Dir(path)), tmpDirPrefix) {
		return fmt.Errorf("%s is %s, which does not exist: it is the kubeconfig an earlier polyop run printed, "+
			"and it went with the local control plane of that run when the run stopped; %s", source, path, remedy)
	}
	return fmt.Errorf("%s is %s, which does not exist: %s", source, path, remedy)
}

// existingCluster connects to a configured cluster and installs the CRDs
// there with server-side apply.
func (r *runner) existingCluster(ctx context.Context, kubeconfig string, crds []*unstructured.Unstructured) (*runCluster, error) {
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
	r.console.printf("using the cluster of kubeconfig context %q (%s); pass --local for a local control plane instead", raw.CurrentContext, config.Host)

	c := &runCluster{config: config, namespace: namespace, kubeconfigArgs: args, env: map[string]string{}}
	if c.client, err = client.New(config, client.Options{Scheme: runScheme()}); err != nil {
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
	if err := waitForCRDs(ctx, c.client, typed); err != nil {
		return nil, err
	}
	return c, nil
}

// waitForCRDs waits until the API server serves every version of crds.
func waitForCRDs(ctx context.Context, c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, crdWaitTimeout, true, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			for _, v := range crd.Spec.Versions {
				if !v.Served {
					continue
				}
				gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
				if _, err := c.RESTMapper().RESTMapping(gk, v.Name); err != nil {
					last = fmt.Errorf("CustomResourceDefinition %s, version %s: %w", crd.Name, v.Name, err)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("waiting %s for the CRDs to be served: %w", crdWaitTimeout, last)
		}
		return fmt.Errorf("waiting %s for the CRDs to be served: %w", crdWaitTimeout, err)
	}
	return nil
}

// localControlPlane starts kube-apiserver and etcd from assets with the CRDs
// installed, and writes a kubeconfig for them.
func (r *runner) localControlPlane(assets string, crds []*unstructured.Unstructured) (*runCluster, error) {
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("no kube-apiserver in %s: set KUBEBUILDER_ASSETS to a folder holding kube-apiserver, etcd and kubectl, or unset it", assets)
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
	config, kubeconfig, stop, err := startLocalControlPlane(assets, typed)
	if err != nil {
		return nil, err
	}
	c := &runCluster{config: config, namespace: "default", stopLocal: stop}

	c.kubeconfig = filepath.Join(r.tmpDir, "kubeconfig")
	if err := os.WriteFile(c.kubeconfig, kubeconfig, 0o600); err != nil {
		return c, fmt.Errorf("writing the kubeconfig: %w", err)
	}
	c.kubeconfigArgs = []string{"--kubeconfig", c.kubeconfig}
	c.env = map[string]string{"KUBECONFIG": c.kubeconfig}
	r.console.printf("the local control plane is up at %s (kube-apiserver and etcd from %s)", config.Host, assets)

	if c.client, err = client.New(config, client.Options{Scheme: runScheme()}); err != nil {
		return c, fmt.Errorf("connecting to the local control plane: %w", err)
	}
	return c, nil
}

// stop stops the local control plane, if the run started one, and removes
// its kubeconfig.
func (c *runCluster) stop() error {
	if c.stopLocal == nil {
		return nil
	}
	var errs []error
	if err := c.stopLocal(); err != nil {
		errs = append(errs, fmt.Errorf("stopping the local control plane: %w", err))
	}
	if c.kubeconfig != "" {
		if err := os.Remove(c.kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// findKubectl returns the kubectl next to the control-plane binaries, when
// there are any, else the one on PATH.
func findKubectl(assets string) (string, error) {
	if assets != "" {
		path := filepath.Join(assets, "kubectl")
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	path, err := exec.LookPath("kubectl")
	if err != nil {
		return "", errors.New("no kubectl on PATH (nor in KUBEBUILDER_ASSETS): install kubectl, or run polyop run --local, whose control plane brings one")
	}
	return path, nil
}

// readCRDs reads the project's CustomResourceDefinitions from config/crd
// and the folders below it.
func (r *runner) readCRDs() ([]*unstructured.Unstructured, error) {
	dir := filepath.Join(r.root, "config", "crd")
	files, err := manifestFiles(dir, true)
	if err != nil {
		return nil, err
	}
	objs, err := readManifests(files)
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
		return nil, fmt.Errorf("no CustomResourceDefinitions in %s: generate them first (polyop generate, or make manifests)", dir)
	}
	return crds, nil
}
