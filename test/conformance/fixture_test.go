package conformance

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/polyop/polyop/internal/testenv"
	polyopclient "github.com/polyop/polyop/sdk/go/client"
)

// fixture is one test's namespace and sockets. Each run gets a namespace of
// its own and, when it has a host, a host that watches only it.
type fixture struct {
	t   *testing.T
	ns  string
	dir string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "cf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := &fixture{t: t, ns: "cf-" + rand.String(6), dir: dir}
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
		t.Fatal(err)
	}
	return f
}

// sidecarAddress is where the fixture's sidecar serves.
func (f *fixture) sidecarAddress() string { return "unix://" + filepath.Join(f.dir, "sidecar.sock") }

// clusterAddress is where the fixture's host serves the Cluster service: by
// default, beside the sidecar's socket.
func (f *fixture) clusterAddress() string { return "unix://" + filepath.Join(f.dir, "cluster.sock") }

// startHost starts the host against the fixture's sidecar, watching only the
// fixture's namespace, and waits until it serves the Cluster service.
func (f *fixture) startHost(args ...string) *testenv.Process {
	f.t.Helper()
	args = append([]string{
		"--kubeconfig", env.Kubeconfig,
		"--sidecar-address", f.sidecarAddress(),
		"--namespace", f.ns,
		"--health-probe-bind-address", "0",
		"--metrics-bind-address", "0",
	}, args...)
	return f.start("host", hostBin, args...)
}

// startSidecar starts a sidecar binary on the fixture's socket.
func (f *fixture) startSidecar(bin string, args ...string) *testenv.Process {
	f.t.Helper()
	return f.start("sidecar", bin, append([]string{"--address", f.sidecarAddress()}, args...)...)
}

func (f *fixture) start(name, bin string, args ...string) *testenv.Process {
	f.t.Helper()
	p, err := testenv.StartProcess(f.t, name+" "+f.ns, bin, args...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(p.Stop)
	return p
}

// client returns the SDK's client, dialing the host's Cluster service as a
// sidecar would.
func (f *fixture) client() *polyopclient.Client {
	f.t.Helper()
	c, err := polyopclient.New(polyopclient.Options{Address: f.clusterAddress(), Scheme: scheme, FieldOwner: "conformance"})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitForSocket waits until the file of a unix address exists.
func (f *fixture) waitForSocket(address string) {
	f.t.Helper()
	path := address[len("unix://"):]
	testenv.Eventually(f.t, 2*time.Minute, "the socket "+path+" exists", func() (bool, string) {
		_, err := os.Stat(path)
		return err == nil, "none"
	})
}
