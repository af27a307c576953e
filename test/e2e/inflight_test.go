package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/testenv"
)

// TestASlowObjectIsHeldAloneAndNeverCalledTwiceAtOnce runs one object whose
// every call works past the host's --reconcile-timeout, ignoring its
// cancellation (as a synchronous Python handler does), beside objects
// answered at once. The host holds the slow object until the sidecar answers
// each call: the sidecar never runs two calls of it at once (its overlap
// detector, a lock file per object, finds none). The call's deadline is that
// object's failure, logged at error level with the object, the controller,
// the call and the deadline; the sidecar is never taken for unreachable, and
// the other objects are reconciled meanwhile.
func TestASlowObjectIsHeldAloneAndNeverCalledTwiceAtOnce(t *testing.T) {
	t.Parallel()
	const (
		timeout = time.Second
		// Past the deadline, within the grace period after it (the reconcile
		// timeout again): each call is answered late, and waited for.
		busy   = 1500 * time.Millisecond
		others = 20
		calls  = 4
	)
	f := newFixture(t)
	overlaps := t.TempDir()
	f.startTestSidecar("--overlap-dir", overlaps)
	host := f.startHost("--reconcile-timeout", timeout.String())
	f.create(f.window("w-slow", map[string]string{"e2e.polyop.dev/busy": busy.String()}))
	for i := range others {
		f.create(f.window(fmt.Sprintf("w%02d", i), nil))
	}

	testenv.Eventually(f.t, 2*time.Minute, fmt.Sprintf("the slow object is called %d times", calls), func() (bool, string) {
		n := len(f.calls("w-slow"))
		return n >= calls, fmt.Sprintf("%d calls", n)
	})
	testenv.Eventually(f.t, 2*time.Minute, "every other object is reconciled", func() (bool, string) {
		n := f.reconciled(others + 1)
		return n == others, fmt.Sprintf("%d of %d", n, others)
	})
	if got, err := os.ReadFile(filepath.Join(overlaps, "overlaps.log")); err == nil {
		t.Errorf("the sidecar ran two calls of one object at once:\n%s", got)
	}

	out := host.Output()
	if n := strings.Count(out, "sidecar unreachable"); n > 0 {
		t.Errorf("one object's calls past their deadline made the host log the sidecar unreachable %d times", n)
	}
	var failed []string
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, `"level":"error"`) && strings.Contains(line, "Reconciler error") && strings.Contains(line, "w-slow") {
			failed = append(failed, line)
		}
	}
	if len(failed) == 0 {
		t.Fatalf("the slow object's failure is not logged at error level:\n%s", testenv.Tail(out, 30))
	}
	for _, want := range []string{
		`"controller":"maintenancewindow"`, "Reconcile call", "MaintenanceWindow " + f.ns + "/w-slow", "within its deadline (1s)",
	} {
		if !strings.Contains(failed[0], want) {
			t.Errorf("the error line does not say %s: %s", want, failed[0])
		}
	}
}

// TestACrashLoopingSidecarConvergesEveryObject runs 100 objects against a
// sidecar that exits on every 10th call it receives, restarted by the test
// half a second after each exit. Every object converges; the sidecar's
// deaths count in no object's retries (every object's calls carry retries 0:
// none fails on its own); and readiness, which gives the sidecar 5s before
// it counts as down, goes down no more often than the sidecar stayed away
// long enough for it. How long the objects took, and the longest any waited
// for a call, are logged.
func TestACrashLoopingSidecarConvergesEveryObject(t *testing.T) {
	t.Parallel()
	const (
		n         = 100
		exitEvery = 10
		restart   = 500 * time.Millisecond
		// An outage shorter than this cannot make the host unready: it
		// waits 5s, and sees the sidecar back at most about 2s after it
		// serves (gRPC's reconnect backoff starts at 1s, with 20% jitter,
		// and grows by 1.6).
		unreadyOutage = 5*time.Second - 2500*time.Millisecond
	)
	f := newFixture(t)
	probe := freePort(t)
	args := []string{"--exit-every", fmt.Sprint(exitEvery)}
	sc := f.startTestSidecar(args...)
	f.startHost("--health-probe-bind-address", probe)
	testenv.Eventually(f.t, 60*time.Second, "the host is ready", func() (bool, string) { return readyz(probe) })

	// The test's supervisor: it restarts the sidecar after each exit, and
	// notes how long each outage lasted, from the exit to the new process
	// serving.
	var (
		mu      sync.Mutex
		outages []time.Duration
	)
	stop := make(chan struct{})
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		for {
			for !sc.Exited() {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
			exited := time.Now()
			time.Sleep(restart)
			sc = f.startTestSidecar(args...)
			if err := sc.WaitForOutput(ctxTimeout(t, time.Minute), "Serving"); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			outages = append(outages, time.Since(exited))
			mu.Unlock()
		}
	}()
	// Readiness, polled as a kubelet with a short period would.
	var unready int
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		ready := true
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ok, _ := readyz(probe)
			if ready && !ok {
				unready++
			}
			ready = ok
		}
	}()

	start := time.Now()
	created := map[string]time.Time{}
	for i := range n {
		name := fmt.Sprintf("w%03d", i)
		f.create(f.window(name, nil))
		created[name] = time.Now()
	}
	testenv.Eventually(f.t, 5*time.Minute, "every object converges", func() (bool, string) {
		c := f.reconciled(n)
		return c == n, fmt.Sprintf("%d of %d reconciled", c, n)
	})
	converged := time.Since(start)
	close(stop)
	<-polled
	<-supervised

	calls := callsIn(t, f.callLog, f.ns)
	byObject := map[string][]time.Time{}
	for _, c := range calls {
		if c.Retries != 0 {
			t.Errorf("%s was called with retries %d, want 0: only the sidecar failed, never the object", c.Name, c.Retries)
		}
		byObject[c.Name] = append(byObject[c.Name], c.Time)
	}
	// The longest wait for a call: from an object's creation to its first
	// call, or between two of its calls.
	var longest time.Duration
	var longestName string
	for name, times := range byObject {
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		prev := created[name]
		for _, at := range times {
			if gap := at.Sub(prev); gap > longest {
				longest, longestName = gap, name
			}
			prev = at
		}
	}
	mu.Lock()
	long := 0
	for _, o := range outages {
		if o >= unreadyOutage {
			long++
		}
	}
	t.Logf("%d objects converged in %s with a sidecar exiting on every %dth call: %d calls, %d restarts (%d outages of %s or more), "+
		"the longest wait for a call %s (%s), readiness went down %d times",
		n, converged.Round(100*time.Millisecond), exitEvery, len(calls), len(outages), long, unreadyOutage,
		longest.Round(100*time.Millisecond), longestName, unready)
	mu.Unlock()
	if len(outages) == 0 {
		t.Fatal("the sidecar never exited: the crash loop was not tested")
	}
	if unready > long {
		t.Errorf("readiness went down %d times, but only %d outages lasted %s or more", unready, long, unreadyOutage)
	}
}
