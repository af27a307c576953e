package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/testenv"
)

// waitWarning waits for a Warning event with reason regarding the object
// name whose note contains every one of notes, and returns the note.
func (f *fixture) waitWarning(name, reason string, notes ...string) string {
	f.t.Helper()
	var found string
	testenv.Eventually(f.t, 60*time.Second, fmt.Sprintf("a Warning %s event on %s", reason, name), func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name != name {
				continue
			}
			seen = append(seen, e.Type+" "+e.Reason+": "+e.Note)
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && contains(e.Note, notes...) {
				found = e.Note
				return true, ""
			}
		}
		return false, strings.Join(seen, "; ")
	})
	return found
}

func TestAMalformedStatusRecordsAWarningEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar()
	f.startHost()

	f.create(f.window("array", map[string]string{"e2e.polyop.dev/bad-status": "true"}))
	f.create(f.window("garbled", map[string]string{"e2e.polyop.dev/bad-status": "not-json"}))
	f.waitWarning("array", "InvalidStatus", "the sidecar returned a status that is not a JSON object", `controller "maintenancewindow"`)
	f.waitWarning("garbled", "InvalidStatus", "the sidecar returned a status that is not valid JSON", `controller "maintenancewindow"`)
	for _, name := range []string{"array", "garbled"} {
		if s := f.get(name).Object["status"]; s != nil {
			t.Errorf("%s: a refused status was written: %v", name, s)
		}
	}
}

func TestAnOversizedChildRecordsAWarningEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar()
	f.startHost()

	f.createWidget("too-big", map[string]any{"configMaps": []any{"too-big-good"}, "value": "v", "badChild": "too-big"})
	f.waitWarning("too-big", "InvalidDesiredChildren", "desired_children[1] is ", fmt.Sprintf("bytes, over the limit of %d bytes", sidecar.DefaultMaxObjectSize))
	if f.configMap("too-big-good") != nil {
		t.Error("the valid child was applied beside an oversized one")
	}
}

// TestAnOversizedStatusIsRefusedInBoundedMemory has the sidecar answer a
// status of 60 MiB: far over what the API server accepts (3 MiB), within the
// gRPC message limit (64 MiB). The host refuses it with a clear error and a
// Warning event, writes nothing, and its peak memory stays within twice the
// message limit above its idle memory (before the bound, it grew by 14 times
// the status).
func TestAnOversizedStatusIsRefusedInBoundedMemory(t *testing.T) {
	t.Parallel()
	const statusSize = 60 << 20
	f := newFixture(t)
	f.startTestSidecar()
	host := f.startHost()

	// Idle: every informer synced and one object reconciled.
	f.create(f.window("warm", nil))
	f.waitPhase("warm", "Reconciled", 60*time.Second)
	idle := procStatusKiB(t, host, "VmRSS")
	resetPeakRSS(t, host)

	f.create(f.window("huge", map[string]string{"e2e.polyop.dev/status-size": strconv.Itoa(statusSize)}))
	note := f.waitWarning("huge", "InvalidStatus", fmt.Sprintf("status is %d bytes, over the limit of %d bytes", statusSize, sidecar.DefaultMaxObjectSize))
	if !contains(note, `controller "maintenancewindow"`, "--max-object-size") {
		t.Errorf("the event does not name the controller and the flag: %q", note)
	}
	if err := host.WaitForOutput(ctxTimeout(t, 30*time.Second), "MaintenanceWindow "+f.ns+"/huge: controller"); err != nil {
		t.Error(err)
	}
	// Retried, each time with the same answer.
	testenv.Eventually(f.t, 60*time.Second, "the object is retried", func() (bool, string) {
		calls := f.calls("huge")
		return len(calls) >= 3, fmt.Sprintf("%d calls", len(calls))
	})
	peak := procStatusKiB(t, host, "VmHWM")
	grew := peak - idle
	bound := int64(2 * sidecar.DefaultMaxMessageSize >> 10)
	t.Logf("host RSS: idle %d MiB, peak %d MiB while refusing a %d MiB status: +%d MiB (bound +%d MiB)",
		idle>>10, peak>>10, statusSize>>20, grew>>10, bound>>10)
	if grew > bound {
		t.Errorf("the host's peak RSS grew by %d MiB, over twice the message limit (%d MiB)", grew>>10, bound>>10)
	}
	if s := f.get("huge").Object["status"]; s != nil {
		t.Errorf("a refused status was written")
	}
}

// TestAnUnreachableSidecarIsLoggedOncePerOutage takes the sidecar away twice
// while an object waits for it: each outage is logged once when the host
// finds it and once when the sidecar answers again, however often the object
// is retried meanwhile (the failed calls count as transport errors, not in
// the object's retries: the sidecar's outage is not the object's failure),
// and no line carries a stack trace.
func TestAnUnreachableSidecarIsLoggedOncePerOutage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	metrics := freePort(t)
	sc := f.startTestSidecar()
	host := f.startHost("--metrics-bind-address", metrics, "--metrics-secure=false", "--sidecar-down-max-backoff", "1s")
	f.create(f.window("w", nil))
	f.waitPhase("w", "Reconciled", 60*time.Second)

	for outage := 1; outage <= 2; outage++ {
		failedBefore := sidecarCalls(t, metrics, "transport_error")
		sc.Kill()
		changed := f.update("w", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, fmt.Sprintf("%dh", outage+1), "spec", "duration")
		}, false)
		testenv.Eventually(f.t, 60*time.Second, "the object is retried while the sidecar is down", func() (bool, string) {
			n := sidecarCalls(t, metrics, "transport_error") - failedBefore
			return n >= 3, fmt.Sprintf("%g calls failed", n)
		})
		sc = f.startTestSidecar()
		testenv.Eventually(f.t, 60*time.Second, "the change is reconciled once the sidecar is back", func() (bool, string) {
			calls := f.calls("w")
			last := calls[len(calls)-1]
			return last.Generation == changed.GetGeneration(), fmt.Sprintf("last call %+v", last)
		})
		if calls := f.calls("w"); calls[len(calls)-1].Retries != 0 {
			t.Errorf("outage %d: the sidecar saw %d retries, want 0: the sidecar's outage is no failure of the object", outage, calls[len(calls)-1].Retries)
		}
		testenv.Eventually(f.t, 30*time.Second, "the host logs that the sidecar is back", func() (bool, string) {
			n := strings.Count(host.Output(), "sidecar reachable again")
			return n == outage, fmt.Sprintf("%d lines", n)
		})
	}

	out := host.Output()
	if n := strings.Count(out, `"msg":"sidecar unreachable`); n != 2 {
		t.Errorf("%d lines say the sidecar is unreachable over two outages, want 2", n)
	}
	if n := strings.Count(out, `"msg":"sidecar reachable again"`); n != 2 {
		t.Errorf("%d lines say the sidecar is reachable again over two outages, want 2", n)
	}
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, `"level":"error"`) && strings.Contains(line, "Unavailable") {
			t.Errorf("an unreachable sidecar is logged as an error on a retry: %s", line)
		}
		if strings.Contains(line, "stacktrace") {
			t.Errorf("a line carries a stack trace: %s", line)
		}
	}
}

// sidecarCalls reads polyop_sidecar_calls_total of the Reconcile calls with
// result from the host's metrics endpoint (0 before it serves).
func sidecarCalls(t *testing.T, metricsAddr, result string) float64 {
	t.Helper()
	return metricValue(t, metricsAddr, `polyop_sidecar_calls_total{controller="maintenancewindow",method="Reconcile",result="`+result+`"}`)
}

// metricValue reads the sample series from the host's metrics endpoint (0
// before it serves).
func metricValue(t *testing.T, metricsAddr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for line := range strings.SplitSeq(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			total += v
		}
	}
	return total
}
