package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/polyop/polyop/internal/testenv"
)

// TestSidecarOutageRecoveryIsBounded takes the sidecar away for 10s, 45s and
// 100s (each with a host and a sidecar of its own, at the same time), with an
// object created during the outage, and measures, from the moment the
// sidecar serves again, how long the host takes to be ready and to call it
// for that object. --sidecar-down-max-backoff bounds both, however long the
// outage: gRPC's reconnect backoff, which otherwise grows to 2m, and each
// object's retry backoff are capped at it.
func TestSidecarOutageRecoveryIsBounded(t *testing.T) {
	t.Parallel()
	const (
		maxBackoff = 2 * time.Second
		// What a loaded machine may add: the host's probe and retry loops,
		// the test's polling, process start-up.
		margin = 5 * time.Second
		// The host is ready within the cap and gRPC's 20% jitter; an object
		// waiting to be retried is called at most one more (capped) retry
		// later.
		readyBound = maxBackoff*6/5 + margin
		callBound  = maxBackoff*6/5 + maxBackoff + margin
	)
	for _, outage := range []time.Duration{10 * time.Second, 45 * time.Second, 100 * time.Second} {
		t.Run(fmt.Sprintf("after an outage of %s", outage), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			probe := freePort(t)
			sc := f.startTestSidecar()
			f.startHost("--sidecar-down-max-backoff", maxBackoff.String(), "--health-probe-bind-address", probe)
			testenv.Eventually(f.t, 60*time.Second, "the host is ready", func() (bool, string) { return readyz(probe) })
			f.create(f.window("before", nil))
			f.waitPhase("before", "Reconciled", 60*time.Second)

			sc.Kill()
			down := time.Now()
			testenv.Eventually(f.t, 30*time.Second, "the host is not ready while the sidecar is down", func() (bool, string) {
				ok, seen := readyz(probe)
				return !ok, seen
			})
			// Reconciling this object fails until the sidecar is back: the
			// host keeps retrying it, and keeps trying to reconnect.
			f.create(f.window("during", nil))
			// The outage itself.
			time.Sleep(time.Until(down.Add(outage)))

			sc = f.startTestSidecar()
			if err := sc.WaitForOutput(ctxTimeout(t, 30*time.Second), "Serving"); err != nil {
				t.Fatal(err)
			}
			back := time.Now()
			testenv.Eventually(f.t, 2*time.Minute+readyBound, "the host is ready again", func() (bool, string) { return readyz(probe) })
			readyAfter := time.Since(back)
			var calledAfter time.Duration
			testenv.Eventually(f.t, 2*time.Minute+callBound, "the sidecar is called for the object created during the outage", func() (bool, string) {
				calls := f.calls("during")
				if len(calls) == 0 {
					return false, "no call"
				}
				calledAfter = calls[0].Time.Sub(back)
				return true, ""
			})
			t.Logf("after an outage of %s the host was ready %s and called the sidecar %s after it served again",
				outage, readyAfter.Round(100*time.Millisecond), calledAfter.Round(100*time.Millisecond))
			if readyAfter > readyBound {
				t.Errorf("the host was ready %s after the sidecar served again, want at most %s", readyAfter.Round(100*time.Millisecond), readyBound)
			}
			if calledAfter > callBound {
				t.Errorf("the host called the sidecar %s after it served again, want at most %s", calledAfter.Round(100*time.Millisecond), callBound)
			}
			f.waitPhase("during", "Reconciled", 30*time.Second)
		})
	}
}

// callsIn returns every Reconcile call of namespace ns that test/testsidecar
// logged to path.
func callsIn(t *testing.T, path, ns string) []call {
	t.Helper()
	file, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var out []call
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		var c call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			// The sidecar may be writing this line right now.
			continue
		}
		if c.Namespace == ns {
			out = append(out, c)
		}
	}
	return out
}

// TestNewLeaderReconcilesFromAWarmCache runs two replicas with leader
// election, each a host with its own sidecar, as two pods would. With 500
// objects created while the leader is converging them, the leader is killed
// (SIGKILL: it cannot release its lease). The follower must take over within
// the lease duration and the retry period, reconcile from the informers it
// kept while following (it lists no MaintenanceWindows once the leader is
// gone: the follower's API requests go through a recording proxy), and every
// object must converge with its status written once.
func TestNewLeaderReconcilesFromAWarmCache(t *testing.T) {
	t.Parallel()
	const (
		n             = 500
		leaseDuration = 4 * time.Second
		renewDeadline = 3 * time.Second
		retryPeriod   = time.Second
		// What a loaded machine may add: the follower's polls of the lease
		// come at the retry period with a 20% jitter, and it may see the
		// leader's last renewal up to one period after the kill.
		margin = 5 * time.Second
	)
	f := newFixture(t)
	writes := watchWrites(t, f.ns)
	dir := filepath.Dir(f.socket)
	leaderElection := []string{
		"--leader-elect",
		"--leader-election-id", "failover.polyop.dev",
		"--leader-election-namespace", f.ns,
		"--leader-election-lease-duration", leaseDuration.String(),
		"--leader-election-renew-deadline", renewDeadline.String(),
		"--leader-election-retry-period", retryPeriod.String(),
	}

	// The first replica leads. Its sidecar is slow (at most 10 objects a
	// second), so that most objects are still pending when it dies, even if
	// creating them is slow.
	f.startTestSidecar("--delay", "100ms")
	first := f.startHost(leaderElection...)
	if err := first.WaitForOutput(ctxTimeout(t, 60*time.Second), "Starting workers"); err != nil {
		t.Fatal(err)
	}

	// The second follows, through the proxy.
	proxy := newAPIProxy(t)
	secondSocket, secondLog := filepath.Join(dir, "second.sock"), filepath.Join(dir, "second.jsonl")
	probe := freePort(t)
	f.startTestSidecar("--address", "unix://"+secondSocket, "--log-file", secondLog)
	second := f.startHost(append(leaderElection,
		"--kubeconfig", proxy.kubeconfig,
		"--sidecar-address", "unix://"+secondSocket,
		"--cluster-address", "unix://"+filepath.Join(dir, "second-cluster.sock"),
		"--health-probe-bind-address", probe,
	)...)
	second.Name = "second host"
	testenv.Eventually(f.t, 60*time.Second, "the second host is ready", func() (bool, string) { return readyz(probe) })

	for i := range n {
		f.create(f.window(fmt.Sprintf("w%03d", i), nil))
	}
	testenv.Eventually(f.t, 60*time.Second, "the leader reconciles some objects", func() (bool, string) {
		c := f.reconciled(n)
		return c > 0, fmt.Sprintf("%d reconciled", c)
	})
	first.Kill()
	killed := time.Now()
	pending := n - f.reconciled(n)
	if pending == 0 {
		t.Fatalf("all %d objects were reconciled before the leader was killed; nothing was pending", n)
	}
	if calls := callsIn(t, secondLog, f.ns); len(calls) > 0 {
		t.Fatalf("the follower reconciled before the leader died: %+v", calls[0])
	}

	testenv.Eventually(f.t, 3*time.Minute, "every object converges under the new leader", func() (bool, string) {
		c := f.reconciled(n)
		return c == n, fmt.Sprintf("%d of %d reconciled", c, n)
	})
	calls := callsIn(t, secondLog, f.ns)
	takeover := calls[0].Time.Sub(killed)
	t.Logf("%d objects were pending when the leader was killed; the new leader's first reconcile came %s later",
		pending, takeover.Round(100*time.Millisecond))
	if bound := leaseDuration + retryPeriod + margin; takeover > bound {
		t.Errorf("the new leader's first reconcile came %s after the leader was killed, want at most %s (lease duration, retry period and a margin)",
			takeover.Round(100*time.Millisecond), bound)
	}

	lists := proxy.lists("maintenancewindows")
	var before, after int
	for _, l := range lists {
		if l.Before(killed) {
			before++
		} else {
			after++
		}
	}
	t.Logf("the second host listed MaintenanceWindows %d times while following, %d times after the leader died", before, after)
	if before == 0 {
		t.Errorf("the follower never listed MaintenanceWindows while following: its informer did not run")
	}
	if after > 0 {
		t.Errorf("the new leader listed MaintenanceWindows %d times after the leader died, want none: it should reconcile from the informer it kept while following", after)
	}

	// Every object's status was written once: the new leader rewrote none
	// that the old one had written.
	testenv.Eventually(f.t, 60*time.Second, "the watch has seen every object's status written", func() (bool, string) {
		for i := range n {
			if name := fmt.Sprintf("w%03d", i); writes.count(name) == 0 {
				return false, name + " not yet"
			}
		}
		return true, ""
	})
	for i := range n {
		name := fmt.Sprintf("w%03d", i)
		if got := writes.count(name); got != 1 {
			t.Errorf("%s was written %d times after its creation, want once (its status)", name, got)
		}
	}
}

// apiProxy forwards a host's requests to the test's API server, with the
// admin's credentials, and records each.
type apiProxy struct {
	// kubeconfig points at the proxy, for --kubeconfig.
	kubeconfig string

	mu       sync.Mutex
	requests []apiRequest
}

type apiRequest struct {
	time   time.Time
	method string
	url    *url.URL
}

func newAPIProxy(t *testing.T) *apiProxy {
	t.Helper()
	target, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := &apiProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			p.mu.Lock()
			p.requests = append(p.requests, apiRequest{time: time.Now(), method: r.In.Method, url: r.In.URL})
			p.mu.Unlock()
			r.SetURL(target)
		},
		Transport: transport,
		// Watches stream.
		FlushInterval: -1,
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + l.Addr().String()}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

// lists returns when each request that listed the collection of resource was
// made: a LIST, or a watch that starts with the current objects (a streaming
// list, sendInitialEvents=true).
func (p *apiProxy) lists(resource string) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Time
	for _, r := range p.requests {
		if r.method != http.MethodGet || path.Base(r.url.Path) != resource {
			continue
		}
		q := r.url.Query()
		if q.Get("watch") != "true" && q.Get("watch") != "1" || q.Get("sendInitialEvents") == "true" {
			out = append(out, r.time)
		}
	}
	return out
}

// writes counts the writes to each MaintenanceWindow of a namespace, from a
// watch that starts before any exists.
type writes struct {
	mu       sync.Mutex
	modified map[string]int
}

func watchWrites(t *testing.T, ns string) *writes {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	resource := dyn.Resource(windowGVK.GroupVersion().WithResource("maintenancewindows")).Namespace(ns)
	list, err := resource.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &toolscache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return resource.Watch(ctx, opts)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ws := &writes{modified: map[string]int{}}
	go func() {
		for e := range w.ResultChan() {
			if e.Type != watch.Modified {
				continue
			}
			if obj, ok := e.Object.(metav1.Object); ok {
				ws.mu.Lock()
				ws.modified[obj.GetName()]++
				ws.mu.Unlock()
			}
		}
	}()
	return ws
}

func (w *writes) count(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.modified[name]
}
