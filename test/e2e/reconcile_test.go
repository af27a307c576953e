package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

func TestCreateWritesStatusAndRecordsEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar()
	host := f.startHost()

	f.create(f.window("first", nil))
	u := f.waitPhase("first", "Reconciled", time.Minute)
	if out := host.Output(); !contains(out, `"msg":"sidecar described itself"`, `"sdk":"polyop-go"`, `"sdkVersion":"`, `"streams":true`) {
		t.Errorf("the host does not log the sidecar's SDK and its version, and that it calls on streams, at start")
	}
	if got := condition(u, "Ready"); got != "True" {
		t.Errorf("Ready condition = %q, want True", got)
	}
	if g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); g != u.GetGeneration() {
		t.Errorf("observedGeneration = %d, want %d", g, u.GetGeneration())
	}
	testenv.Eventually(f.t, time.Minute, "a Reconciled event is recorded on the object", func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "first" && e.Reason == "Reconciled" && e.Type == "Normal" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
}

func TestWithoutStreamsTheHostCallsUnary(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar()
	host := f.startHost("--sidecar-streams=false")

	f.create(f.window("unary", nil))
	u := f.waitPhase("unary", "Reconciled", time.Minute)
	if got := condition(u, "Ready"); got != "True" {
		t.Errorf("Ready condition = %q, want True", got)
	}
	if out := host.Output(); !contains(out, `"msg":"sidecar described itself"`, `"streams":false`) {
		t.Errorf("the host does not log that it makes unary calls")
	}
}

func TestSpecChangeReconcilesAgainButStatusChangeDoesNot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar()
	f.startHost()

	f.create(f.window("gen", nil))
	f.waitPhase("gen", "Reconciled", time.Minute)

	// Someone else writes the status: generation does not change, so the
	// generation-changed predicate the sidecar declared filters the event.
	tampered := f.update("gen", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "Tampered", "status", "phase")
	}, true)
	// A later event proves the host has handled the status update: the
	// informer delivers events in order and the workqueue hands requests out
	// in order, so once an object created after the update is reconciled, a
	// reconcile of the update, had the predicate let it through, has begun
	// (and, before the spec change below, sees the tampered version).
	f.create(f.window("after-tampering", nil))
	f.waitPhase("after-tampering", "Reconciled", 2*time.Minute)

	// A spec change bumps the generation and is reconciled.
	changed := f.update("gen", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "2h", "spec", "duration")
	}, false)
	testenv.Eventually(f.t, time.Minute, "the spec change is reconciled", func() (bool, string) {
		calls := f.calls("gen")
		return len(calls) > 0 && calls[len(calls)-1].Generation == changed.GetGeneration(), fmt.Sprintf("%+v", calls)
	})
	for _, c := range f.calls("gen") {
		if c.ResourceVersion == tampered.GetResourceVersion() {
			t.Errorf("the status-only update (resourceVersion %s) was reconciled: %+v", c.ResourceVersion, c)
		}
	}
	f.waitPhase("gen", "Reconciled", time.Minute)
}

func TestDeletedObjectReachesTheSidecarAsGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar()
	f.startHost()

	f.create(f.window("doomed", nil))
	f.waitPhase("doomed", "Reconciled", time.Minute)
	if err := k8s.Delete(context.Background(), f.get("doomed")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(f.t, time.Minute, "the sidecar sees the object gone", func() (bool, string) {
		calls := f.calls("doomed")
		return len(calls) > 0 && !calls[len(calls)-1].Exists, fmt.Sprintf("%+v", calls)
	})
}

func TestTransientErrorIsRetriedWithGrowingBackoff(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar()
	f.startHost()

	const failures = 8
	f.create(f.window("flaky", map[string]string{"e2e.polyop.dev/fail-times": fmt.Sprint(failures)}))
	f.waitPhase("flaky", "Reconciled", 2*time.Minute)

	calls := f.calls("flaky")
	if len(calls) < failures+1 {
		t.Fatalf("got %d calls, want at least %d: %+v", len(calls), failures+1, calls)
	}
	calls = calls[:failures+1]
	for i, c := range calls {
		if c.Retries != i {
			t.Errorf("call %d carried retries=%d, want %d", i, c.Retries, i)
		}
	}
	// controller-runtime's backoff starts at 5ms and doubles: the wait before
	// the last attempt is at least 5ms·2^(failures-1).
	gap := func(i int) time.Duration { return calls[i].Time.Sub(calls[i-1].Time) }
	last := gap(failures)
	minimum := 5 * time.Millisecond << (failures - 1)
	if last < minimum*9/10 {
		t.Errorf("the last retry came %s after the one before, want at least %s", last, minimum)
	}
	// Each gap is the backoff plus the time a round trip takes, which a busy
	// machine stretches: the shortest of the first three gaps (backoffs of
	// 5ms to 20ms) is the one least stretched, and a backoff that grows puts
	// the last gap well above it.
	early := min(gap(1), gap(2), gap(3))
	if last-early < minimum/2 {
		t.Errorf("backoff did not grow: shortest early gap %s, last gap %s", early, last)
	}
}

func TestTerminalErrorIsNotRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	metrics := freePort(t)
	f.startTestSidecar()
	host := f.startHost("--metrics-bind-address", metrics, "--metrics-secure=false")

	f.create(f.window("fatal", map[string]string{"e2e.polyop.dev/terminal": "spec can never work"}))
	testenv.Eventually(f.t, 2*time.Minute, "the sidecar is called", func() (bool, string) {
		return len(f.calls("fatal")) > 0, ""
	})
	if err := host.WaitForOutput(ctxTimeout(t, time.Minute), "spec can never work"); err != nil {
		t.Error(err)
	}
	// controller-runtime counts a terminal error once it has decided not to
	// requeue the request (a retry is queued before the count), so the
	// counters say it was not retried, without waiting for a retry to come.
	var scrape string
	testenv.Eventually(f.t, time.Minute, "the host counts a terminal error", func() (bool, string) {
		var err error
		if scrape, err = f.scrapeMetrics(metrics); err != nil {
			return false, err.Error()
		}
		n := metric(scrape, "controller_runtime_terminal_reconcile_errors_total", "controller", "maintenancewindow")
		return n == 1, fmt.Sprint(n)
	})
	reconciles := metric(scrape, "controller_runtime_reconcile_total", "controller", "maintenancewindow")
	retries := metric(scrape, "workqueue_retries_total", "controller", "maintenancewindow")
	if reconciles != 1 || retries != 0 {
		t.Fatalf("a terminal error was retried: %g reconciles, %g requeues with a delay", reconciles, retries)
	}
	if n := len(f.calls("fatal")); n != 1 {
		t.Fatalf("a terminal error was retried: %d calls: %+v", n, f.calls("fatal"))
	}

	// The next event (a spec change) reconciles it again, from zero retries.
	changed := f.update("fatal", func(u *unstructured.Unstructured) {
		u.SetAnnotations(nil)
		_ = unstructured.SetNestedField(u.Object, "3h", "spec", "duration")
	}, false)
	f.waitPhase("fatal", "Reconciled", time.Minute)
	calls := f.calls("fatal")
	if last := calls[len(calls)-1]; last.Generation != changed.GetGeneration() || last.Retries != 0 {
		t.Errorf("after the spec change the sidecar got %+v, want generation %d and 0 retries", last, changed.GetGeneration())
	}
}

func TestMalformedStatusIsAClearErrorAndRecovers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar()
	host := f.startHost()

	f.create(f.window("garbled", map[string]string{"e2e.polyop.dev/bad-status": "true"}))
	if err := host.WaitForOutput(ctxTimeout(t, time.Minute), "the sidecar returned a status that is not a JSON object"); err != nil {
		t.Fatal(err)
	}
	// It stays queued: retries keep coming with growing counts.
	testenv.Eventually(f.t, time.Minute, "the object is retried", func() (bool, string) {
		calls := f.calls("garbled")
		return len(calls) >= 3 && calls[len(calls)-1].Retries >= 2, fmt.Sprintf("%d calls", len(calls))
	})
	// Once the sidecar answers properly, it converges.
	f.update("garbled", func(u *unstructured.Unstructured) { u.SetAnnotations(nil) }, false)
	f.waitPhase("garbled", "Reconciled", 2*time.Minute)
}

func TestSidecarKilledWithWorkPendingLosesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	probe := freePort(t)
	// Each reconcile takes 50ms or more: the 190 left after the first 10
	// take seconds, time enough to kill the sidecar with work pending.
	sc := f.startTestSidecar("--delay", "50ms")
	f.startHost("--sidecar-down-max-backoff", "2s", "--health-probe-bind-address", probe)

	const n = 200
	for i := range n {
		f.create(f.window(fmt.Sprintf("w%03d", i), nil))
	}
	testenv.Eventually(f.t, 2*time.Minute, "some objects are reconciled", func() (bool, string) {
		c := f.reconciled(n)
		return c >= 10, fmt.Sprintf("%d reconciled", c)
	})
	sc.Kill()
	if c := f.reconciled(n); c == n {
		t.Fatalf("all %d objects were reconciled before the sidecar was killed; nothing was pending", n)
	}
	// The host notices the outage (its readiness follows the sidecar) before
	// the sidecar comes back.
	testenv.Eventually(f.t, 2*time.Minute, "the host is not ready while the sidecar is down", func() (bool, string) {
		ok, seen := readyz(probe)
		return !ok, seen
	})
	f.startTestSidecar()
	testenv.Eventually(f.t, 3*time.Minute, "every object converges after the sidecar returns", func() (bool, string) {
		c := f.reconciled(n)
		return c == n, fmt.Sprintf("%d of %d reconciled", c, n)
	})
}

// reconciled counts the fixture's objects whose status says Reconciled.
func (f *fixture) reconciled(n int) int {
	f.t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(windowGVK.GroupVersion().WithKind("MaintenanceWindowList"))
	if err := k8s.List(context.Background(), list, client.InNamespace(f.ns)); err != nil {
		f.t.Fatal(err)
	}
	count := 0
	for i := range list.Items {
		if phase(&list.Items[i]) == "Reconciled" {
			count++
		}
	}
	return count
}

func TestHostStartedBeforeSidecarWaitsForIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	host := f.startHost()
	if err := host.WaitForOutput(ctxTimeout(t, time.Minute), "waiting for the sidecar"); err != nil {
		t.Fatal(err)
	}
	f.startTestSidecar()
	f.create(f.window("late", nil))
	f.waitPhase("late", "Reconciled", 2*time.Minute)
}

func TestReadinessFollowsTheSidecar(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	probe := freePort(t)
	sc := f.startTestSidecar()
	f.startHost("--health-probe-bind-address", probe)

	ready := func() (bool, string) { return readyz(probe) }
	testenv.Eventually(f.t, 2*time.Minute, "the host is ready", ready)
	sc.Kill()
	testenv.Eventually(f.t, time.Minute, "the host is not ready while the sidecar is down", func() (bool, string) {
		ok, seen := ready()
		return !ok, seen
	})
	f.startTestSidecar()
	testenv.Eventually(f.t, 2*time.Minute, "the host is ready again", ready)
}

// readyz reports whether the host's readiness probe at probe passes, and what
// it answered.
func readyz(probe string) (bool, string) {
	resp, err := http.Get("http://" + probe + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

func TestHostRefusesToStart(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		sidecarArgs []string
		want        []string
	}{
		"if the sidecar speaks another protocol version, the host names both": {
			sidecarArgs: []string{"--protocol-version", "9"},
			want:        []string{"protocol version mismatch", "the sidecar speaks 9", "this host speaks PROTOCOL_VERSION_V1ALPHA1"},
		},
		"if the sidecar sets no protocol version, the host says so": {
			sidecarArgs: []string{"--protocol-version", "PROTOCOL_VERSION_UNSPECIFIED"},
			want:        []string{"protocol version mismatch", "the sidecar speaks PROTOCOL_VERSION_UNSPECIFIED (it set no protocol_version)", "this host speaks PROTOCOL_VERSION_V1ALPHA1"},
		},
		"if the sidecar declares a kind the API server does not serve, the host names it": {
			sidecarArgs: []string{"--kind-override", "examples.polyop.dev/v1/Nonexistent"},
			want:        []string{"maintenancewindow", "reconciles Nonexistent.examples.polyop.dev/v1, which the API server does not serve"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.startTestSidecar(tc.sidecarArgs...)
			host := f.startHost()
			code, err := host.Wait(2 * time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if code == 0 {
				t.Fatalf("the host exited 0; want a failure")
			}
			if out := host.Output(); !contains(out, tc.want...) {
				t.Errorf("the host's output does not say %q:\n%s", strings.Join(tc.want, `", "`), out)
			}
		})
	}

	t.Run("if no sidecar ever comes, the host gives up after its wait timeout", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		host := f.startHost("--sidecar-wait-timeout", "2s")
		code, err := host.Wait(2 * time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if want := "did not become ready within 2s"; code == 0 || !strings.Contains(host.Output(), want) {
			t.Errorf("exit code %d, want non-zero and a message containing %q:\n%s", code, want, host.Output())
		}
	})
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
