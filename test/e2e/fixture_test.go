package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

var windowGVK = schema.GroupVersionKind{Group: "examples.polyop.dev", Version: "v1", Kind: "MaintenanceWindow"}

// fixture is one test's namespace, socket and call log. Each test gets a
// namespace of its own and a host that watches only it, so tests do not see
// each other's objects.
type fixture struct {
	t       *testing.T
	ns      string
	socket  string
	callLog string
	// c and kubeconfig reach the fixture's API server: the suite's.
	c          client.Client
	kubeconfig string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "po-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := &fixture{
		t:       t,
		ns:      "e2e-" + rand.String(6),
		socket:  filepath.Join(dir, "sidecar.sock"),
		callLog: filepath.Join(dir, "calls.jsonl"),

		c:          k8s,
		kubeconfig: env.Kubeconfig,
	}
	if err := f.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) address() string { return "unix://" + f.socket }

// startTestSidecar starts test/testsidecar on the fixture's socket, logging
// its calls to the fixture's call log.
func (f *fixture) startTestSidecar(args ...string) *testenv.Process {
	f.t.Helper()
	args = append([]string{"--address", f.address(), "--log-file", f.callLog, "--update-filters", "generation"}, args...)
	return f.start("sidecar", testSidecarBin, args...)
}

// startHost starts the host against the fixture's socket, watching only the
// fixture's namespace.
func (f *fixture) startHost(args ...string) *testenv.Process {
	f.t.Helper()
	return f.startHostWith(nil, args...)
}

// startHostWith starts the host as startHost does, with extraEnv added to
// its environment.
func (f *fixture) startHostWith(extraEnv []string, args ...string) *testenv.Process {
	f.t.Helper()
	return f.startWith("host", hostBin, extraEnv, f.hostArgs(args...)...)
}

// hostArgs are the arguments of a host startHost starts: args after the
// fixture's own.
func (f *fixture) hostArgs(args ...string) []string {
	return append([]string{
		"--kubeconfig", f.kubeconfig,
		"--sidecar-address", f.address(),
		"--namespace", f.ns,
		"--health-probe-bind-address", "0",
		"--metrics-bind-address", "0",
		"--zap-log-level", "debug",
		// No webhook server unless a test asks for one on a port of its own:
		// tests run in parallel and must not share :9443.
		"--webhook-port", "0",
	}, args...)
}

func (f *fixture) start(name, bin string, args ...string) *testenv.Process {
	f.t.Helper()
	return f.startWith(name, bin, nil, args...)
}

// startWith starts bin as start does, with extraEnv added to its
// environment.
func (f *fixture) startWith(name, bin string, extraEnv []string, args ...string) *testenv.Process {
	f.t.Helper()
	p, err := testenv.StartProcessWith(name, bin, args, testenv.ProcessOptions{Logger: f.t, Env: extraEnv})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(p.Stop)
	return p
}

// window builds a MaintenanceWindow in the fixture's namespace.
func (f *fixture) window(name string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(windowGVK)
	u.SetNamespace(f.ns)
	u.SetName(name)
	u.SetAnnotations(annotations)
	u.Object["spec"] = map[string]any{"start": "2026-01-01T00:00:00Z", "duration": "1h"}
	return u
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := f.c.Create(context.Background(), obj); err != nil {
		f.t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

func (f *fixture) get(name string) *unstructured.Unstructured {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(windowGVK)
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, u); err != nil {
		f.t.Fatalf("getting %s: %v", name, err)
	}
	return u
}

// update reads name, applies change and writes it back, retrying conflicts.
func (f *fixture) update(name string, change func(*unstructured.Unstructured), subresource bool) *unstructured.Unstructured {
	f.t.Helper()
	var u *unstructured.Unstructured
	err := retry.RetryOnConflict(conflictRetry, func() error {
		u = f.get(name)
		change(u)
		if subresource {
			return f.c.Status().Update(context.Background(), u)
		}
		return f.c.Update(context.Background(), u)
	})
	if err != nil {
		f.t.Fatalf("updating %s: %v", name, err)
	}
	return u
}

// conflictRetry retries a write that lost a race with the host's own writes
// for up to about 10s: the host writes an object a few times per reconcile.
var conflictRetry = wait.Backoff{Steps: 200, Duration: 50 * time.Millisecond, Factor: 1, Jitter: 0.1}

// call is one line of test/testsidecar's call log.
type call struct {
	Time            time.Time `json:"time"`
	Namespace       string    `json:"namespace"`
	Name            string    `json:"name"`
	Exists          bool      `json:"exists"`
	Generation      int64     `json:"generation"`
	ResourceVersion string    `json:"resourceVersion"`
	Retries         int       `json:"retries"`
}

// calls returns the Reconcile calls the sidecar logged for name.
func (f *fixture) calls(name string) []call {
	f.t.Helper()
	var out []call
	for _, c := range callsIn(f.t, f.callLog, f.ns) {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// phase is the object's status.phase.
func phase(u *unstructured.Unstructured) string {
	p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return p
}

// condition returns the status of a condition of u, or "" when absent.
func condition(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

func (f *fixture) waitPhase(name, want string, timeout time.Duration) *unstructured.Unstructured {
	f.t.Helper()
	var u *unstructured.Unstructured
	testenv.Eventually(f.t, timeout, fmt.Sprintf("%s has phase %q", name, want), func() (bool, string) {
		u = f.get(name)
		return phase(u) == want, fmt.Sprintf("phase %q", phase(u))
	})
	return u
}

// freePort returns a loopback address with a port free right now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
