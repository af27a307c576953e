package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/polyop/polyop/internal/testenv/build"
)

// KubernetesVersion is the version of the control plane `make envtest` builds.
const KubernetesVersion = "1.37.2"

// controlPlaneTimeout bounds the start and the stop of each control-plane
// component and the wait for the CRDs to be served. A healthy start takes a
// few seconds; the bound is for a machine busy with other builds and suites.
const controlPlaneTimeout = 3 * time.Minute

// Env is a running control plane.
type Env struct {
	// Config is an admin REST config for the API server.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file for child processes
	// and kubectl.
	Kubeconfig string
	// Kubectl is the path of the kubectl binary built with the control plane.
	Kubectl string

	env *envtest.Environment
	dir string
	// auditLog is the API server's audit log; "" without one.
	auditLog string
}

// AssetsDir finds the control-plane binaries: KUBEBUILDER_ASSETS when set,
// otherwise bin/k8s-<KubernetesVersion> in the repository.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(build.RepoRoot(), "bin", "k8s-"+KubernetesVersion)
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("no %s in %s: run `make envtest` (or `make test`), which builds the control plane from source: %w", b, dir, err)
		}
	}
	return dir, nil
}

// Options configure the control plane StartWith starts.
type Options struct {
	// CRDDirs are directories of CRD manifests to install.
	CRDDirs []string
	// FeatureGates are the API server's feature gates to turn on, by name,
	// e.g. "ShardedListAndWatch". None by default.
	FeatureGates []string
	// AuditUsers are the users whose write requests the API server writes
	// to its audit log (Env.AuditLog), with their bodies; add them with
	// Env.AddUser. None by default: no audit log.
	AuditUsers []string
}

// Start starts a control plane with the CRDs found in crdDirs installed.
// Stop it with Env.Stop.
func Start(crdDirs ...string) (*Env, error) {
	return StartWith(Options{CRDDirs: crdDirs})
}

// StartWith starts a control plane as opts say. Stop it with Env.Stop.
func StartWith(opts Options) (*Env, error) {
	crdDirs := opts.CRDDirs
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	e := &Env{
		env: &envtest.Environment{
			BinaryAssetsDirectory: assets,
			CRDDirectoryPaths:     crdDirs,
			ErrorIfCRDPathMissing: true,
			// envtest waits 10s for the CRDs to be served by default: short
			// on a loaded machine, where several suites start at once.
			CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: controlPlaneTimeout},
		},
		Kubectl: filepath.Join(assets, "kubectl"),
	}
	if len(opts.FeatureGates) > 0 {
		gates := make([]string, len(opts.FeatureGates))
		for i, g := range opts.FeatureGates {
			gates[i] = g + "=true"
		}
		e.env.ControlPlane.GetAPIServer().Configure().Append("feature-gates", strings.Join(gates, ","))
	}
	if len(opts.AuditUsers) > 0 {
		if e.dir, err = os.MkdirTemp("", "polyop-env-"); err != nil {
			return nil, err
		}
		if e.auditLog, err = configureAudit(e.env, e.dir, opts.AuditUsers); err != nil {
			return nil, errors.Join(err, os.RemoveAll(e.dir))
		}
	}
	// So is its 20s for each component to start or stop, unless set through
	// its own environment variables.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		e.env.ControlPlaneStartTimeout = controlPlaneTimeout
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT") == "" {
		e.env.ControlPlaneStopTimeout = controlPlaneTimeout
	}
	cfg, err := e.env.Start()
	if err != nil {
		if e.dir != "" {
			err = errors.Join(err, os.RemoveAll(e.dir))
		}
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	e.Config = cfg
	if e.dir == "" {
		if e.dir, err = os.MkdirTemp("", "polyop-env-"); err != nil {
			return nil, errors.Join(err, e.env.Stop())
		}
	}
	user, err := e.env.AddUser(envtest.User{Name: "polyop-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("adding an admin user: %w", err), e.Stop())
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	e.Kubeconfig = filepath.Join(e.dir, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, kc, 0o600); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	return e, nil
}

// Stop stops the control plane and removes the kubeconfig.
func (e *Env) Stop() error {
	err := e.env.Stop()
	if e.dir != "" {
		err = errors.Join(err, os.RemoveAll(e.dir))
	}
	return err
}
