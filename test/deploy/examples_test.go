package deploy

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/polyop/polyop/internal/testenv"
)

// example is what the tests need to know about an example that an overlay of
// config/overlays deploys; every example there needs an entry in examples.
type example struct {
	// sidecar returns the command that runs the sidecar on this machine, in
	// place of the image's ENTRYPOINT; the tests append the container's
	// arguments.
	sidecar func(t *testing.T) []string
	// addressFlag is the sidecar's flag naming the address it serves on.
	addressFlag string
	// dockerfile builds the sidecar's image.
	dockerfile string
	// samples holds sample objects the sidecar reconciles.
	samples string
	// sidecarRules is what the sidecar reads or writes through the Cluster
	// service beyond the kinds it declares, which `host rbac` cannot know:
	// the overlay grants it in a role of its own, cluster-wide.
	sidecarRules []rbacv1.PolicyRule
	// finalizes says the sidecar puts a finalizer of its own on its objects:
	// the tests wait for it before deleting a sample, so that the deletion
	// runs the sidecar's clean-up (and records its event) instead of racing
	// it.
	finalizes bool
}

var examples = map[string]example{
	"go-maintenancewindow": {
		sidecar:     goBinary("./examples/go/maintenancewindow"),
		addressFlag: "address",
		dockerfile:  "examples/go/maintenancewindow/Dockerfile",
		samples:     "examples/go/maintenancewindow/config/samples",
	},
	"go-memcached": {
		sidecar:     goBinary("./examples/go/memcached"),
		addressFlag: "address",
		dockerfile:  "examples/go/memcached/Dockerfile",
		samples:     "examples/go/memcached/config/samples",
		// It adds and removes its finalizer itself, with Update, as
		// kubebuilder's memcached does.
		finalizes: true,
		sidecarRules: []rbacv1.PolicyRule{
			{APIGroups: []string{"examples.polyop.dev"}, Resources: []string{"memcacheds"}, Verbs: []string{"update"}},
		},
	},
	"go-website": {
		sidecar:     goBinary("./examples/go/website"),
		addressFlag: "address",
		dockerfile:  "examples/go/website/Dockerfile",
		samples:     "examples/go/website/config/samples",
	},
	"python-tenant": {
		sidecar:     installed(".venv/bin/tenant-sidecar", "make .venv"),
		addressFlag: "address",
		dockerfile:  "examples/python/tenant/Dockerfile",
		samples:     "examples/python/tenant/config/samples",
	},
	"typescript-configmapsync": {
		sidecar:     node("examples/typescript/configmapsync/dist/main.js"),
		addressFlag: "address",
		dockerfile:  "examples/typescript/configmapsync/Dockerfile",
		samples:     "examples/typescript/configmapsync/config/samples",
		// It lists namespaces and writes the copies of a ConfigMap through
		// the Cluster service, which the description does not say.
		sidecarRules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "delete"}},
		},
	},
}

func exampleOf(t *testing.T, o overlay) example {
	t.Helper()
	ex, ok := examples[o.example]
	if !ok {
		t.Fatalf("config/overlays/%s deploys the example %q, which test/deploy does not know: add it to examples", o.name, o.example)
	}
	return ex
}

// goBinary builds a Go main package (once) and runs it.
func goBinary(pkg string) func(t *testing.T) []string {
	return func(t *testing.T) []string {
		t.Helper()
		bin, err := testenv.Build(pkg)
		if err != nil {
			t.Fatal(err)
		}
		return []string{bin}
	}
}

// installed runs a program installed in the repository (a virtualenv's), or
// skips the test when it is not.
func installed(program, how string) func(t *testing.T) []string {
	return func(t *testing.T) []string {
		t.Helper()
		bin := repo(program)
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("%s is not installed (%s): %v", program, how, err)
		}
		return []string{bin}
	}
}

// node runs a compiled script with node, or skips the test when node or the
// script is missing (make node_modules, then tsc -b, which make manifests
// runs).
func node(script string) func(t *testing.T) []string {
	return func(t *testing.T) []string {
		t.Helper()
		bin, err := exec.LookPath("node")
		if err != nil {
			t.Skipf("no node: %v", err)
		}
		if _, err := os.Stat(repo(script)); err != nil {
			t.Skipf("%s is not compiled (make manifests compiles it): %v", script, err)
		}
		return []string{bin, repo(script)}
	}
}

// podDirs stands in for a pod's volumes on this machine: each mount path maps
// to a local folder, so that the containers' arguments can be run here.
type podDirs struct {
	mounts []string // longest first
	dirs   map[string]string
}

// newPodDirs makes a short-named folder per volume mounted in the pod (unix
// socket paths are limited to 108 bytes). A volume mounted in two containers
// at two paths gets one folder.
func newPodDirs(t *testing.T, pod *corev1.PodSpec) *podDirs {
	t.Helper()
	root, err := os.MkdirTemp("", "pd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	p := &podDirs{dirs: map[string]string{}}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		for _, m := range c.VolumeMounts {
			if _, ok := p.dirs[m.MountPath]; ok {
				continue
			}
			dir := filepath.Join(root, m.Name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			p.dirs[m.MountPath] = dir
			p.mounts = append(p.mounts, m.MountPath)
		}
	}
	slices.SortFunc(p.mounts, func(a, b string) int { return len(b) - len(a) })
	return p
}

// local rewrites every mount path in s to its local folder.
func (p *podDirs) local(s string) string {
	for _, m := range p.mounts {
		s = strings.ReplaceAll(s, m, p.dirs[m])
	}
	return s
}

func (p *podDirs) localAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = p.local(a)
	}
	return out
}

// expandEnv expands $(VAR) references to c's environment in args, as the
// kubelet does.
func expandEnv(c *corev1.Container, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for _, e := range c.Env {
			a = strings.ReplaceAll(a, "$("+e.Name+")", e.Value)
		}
		out[i] = a
	}
	return out
}

// freePort returns a TCP port nothing listens on, on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startSidecar runs the example's sidecar with the sidecar container's
// arguments and environment, its volumes mapped to dirs.
func startSidecar(t *testing.T, ex example, c *corev1.Container, dirs *podDirs) *testenv.Process {
	t.Helper()
	p, err := startWithEnv(t, "sidecar", c, dirs, append(ex.sidecar(t), dirs.localAll(expandEnv(c, c.Args))...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// startWithEnv runs args with the container's environment variables that
// have a value (env(1) sets them and execs the command, so the process's ID
// stays the command's).
func startWithEnv(t *testing.T, name string, c *corev1.Container, dirs *podDirs, args []string, extraEnv ...string) (*testenv.Process, error) {
	t.Helper()
	envArgs := []string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			envArgs = append(envArgs, e.Name+"="+dirs.local(e.Value))
		}
	}
	envArgs = append(envArgs, extraEnv...)
	return testenv.StartProcess(t, name, "/usr/bin/env", append(envArgs, args...)...)
}

// sidecarAddress is the address the sidecar container serves on: its address
// flag, or the default of the host and the SDKs.
func sidecarAddress(ex example, c *corev1.Container) string {
	if v, ok := flagValue(c.Args, ex.addressFlag); ok {
		return v
	}
	return defaultSidecarAddress
}

const (
	defaultSidecarAddress = "unix:///var/run/polyop/sidecar.sock"
	defaultClusterAddress = "unix:///var/run/polyop/cluster.sock"
	defaultCertDir        = "/tmp/k8s-webhook-server/serving-certs"
)

func mustf(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
}
