package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/testenv"
)

// TestSidecarCallsAreCountedByResult drives each result class of
// polyop_sidecar_calls_total through a real host and sidecar (success, a
// transient and a terminal Failure, a call that outlasts --reconcile-timeout,
// a sidecar that is gone) and reads the counters from the host's metrics
// endpoint; with the sidecar gone, polyop_sidecar_up is 0 and
// /readyz?verbose says why the sidecar check fails.
func TestSidecarCallsAreCountedByResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	metrics, probe := freePort(t), freePort(t)
	sc := f.startTestSidecar("--max-concurrent-reconciles", "4")
	f.startHost("--metrics-bind-address", metrics, "--metrics-secure=false", "--health-probe-bind-address", probe,
		"--reconcile-timeout", "1s", "--sidecar-down-max-backoff", "1s")

	f.create(f.window("ok", nil))
	f.create(f.window("transient", map[string]string{"e2e.polyop.dev/fail-times": "1"}))
	f.create(f.window("terminal", map[string]string{"e2e.polyop.dev/terminal": "the spec cannot be met"}))
	f.create(f.window("slow", map[string]string{"e2e.polyop.dev/delay": "1m"}))
	f.waitPhase("ok", "Reconciled", time.Minute)
	f.waitPhase("transient", "Reconciled", time.Minute)

	calls := func(s, result string) float64 {
		return metric(s, "polyop_sidecar_calls_total", "controller", "maintenancewindow", "method", "Reconcile", "result", result)
	}
	testenv.Eventually(t, time.Minute, "every result the sidecar can give is counted", func() (bool, string) {
		s, err := f.scrapeMetrics(metrics)
		if err != nil {
			return false, err.Error()
		}
		got := map[string]float64{}
		for _, r := range []string{"success", "transient_error", "terminal_error", "timeout"} {
			got[r] = calls(s, r)
		}
		return got["success"] >= 2 && got["transient_error"] >= 1 && got["terminal_error"] >= 1 && got["timeout"] >= 1 &&
			metric(s, "polyop_sidecar_up") == 1, fmt.Sprintf("%v, polyop_sidecar_up %v", got, metric(s, "polyop_sidecar_up"))
	})
	s, err := f.scrapeMetrics(metrics)
	if err != nil {
		t.Fatal(err)
	}
	// The terminal error is one call: never retried, and not a success.
	if n := calls(s, "terminal_error"); n != 1 {
		t.Errorf("%v terminal errors counted, want the one of object terminal", n)
	}
	if n := metric(s, "polyop_sidecar_request_bytes_count", "method", "Reconcile"); n < calls(s, "success") {
		t.Errorf("%v Reconcile request sizes measured, want one for each call", n)
	}
	if n := metric(s, "polyop_sidecar_response_bytes_sum", "method", "Reconcile"); n <= 0 {
		t.Errorf("the Reconcile responses measure %v bytes in all", n)
	}

	// The sidecar goes: the calls for the slow object, retried, fail to
	// reach it, the gauge says it is down, and readiness says why.
	sc.Kill()
	testenv.Eventually(t, time.Minute, "calls to a sidecar that is gone are transport errors, and it is down", func() (bool, string) {
		s, err := f.scrapeMetrics(metrics)
		if err != nil {
			return false, err.Error()
		}
		n := calls(s, "transport_error")
		return n >= 1 && metric(s, "polyop_sidecar_up") == 0, fmt.Sprintf("%v transport errors, polyop_sidecar_up %v", n, metric(s, "polyop_sidecar_up"))
	})
	want := "[-]sidecar failed: sidecar at " + f.address() + " is unreachable"
	testenv.Eventually(t, time.Minute, "/readyz?verbose says why the sidecar check fails", func() (bool, string) {
		body, err := get("http://" + probe + "/readyz?verbose")
		return err == nil && strings.Contains(body, want), fmt.Sprintf("%s %v", body, err)
	})
}

// TestDashboardAndAlertsReadMetricsTheHostServes checks config/grafana's
// dashboard and config/prometheus-rules' alerts with Prometheus's own parsers
// (hack/tools/promcheck), and that every metric their queries read is one a
// running host serves, scraped after a reconcile that applied children.
func TestDashboardAndAlertsReadMetricsTheHostServes(t *testing.T) {
	t.Parallel()
	promcheck := buildPromcheck(t)
	f := newFixture(t)
	metrics := freePort(t)
	f.startChildSidecar()
	f.startHost("--metrics-bind-address", metrics, "--metrics-secure=false")
	f.createWidget("w", map[string]any{"configMaps": []any{"a"}, "value": "one"})
	testenv.Eventually(t, time.Minute, "a child is applied", func() (bool, string) {
		s, err := f.scrapeMetrics(metrics)
		if err != nil {
			return false, err.Error()
		}
		n := metric(s, "polyop_children_total", "controller", "widget", "kind", "ConfigMap", "action", "applied")
		return n >= 1, fmt.Sprintf("%v applied", n)
	})
	f.waitIdle(metrics, "widget")
	s, err := f.scrapeMetrics(metrics)
	if err != nil {
		t.Fatal(err)
	}
	served := servedNames(s)

	root := testenv.RepoRoot()
	out, err := exec.Command(promcheck,
		filepath.Join(root, "config", "prometheus-rules", "rules.yaml"),
		filepath.Join(root, "config", "grafana", "polyop.json")).Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("promcheck: %v\n%s", err, stderr)
	}
	names := strings.Fields(string(out))
	if len(names) == 0 {
		t.Fatal("promcheck found no metric names")
	}
	for _, name := range names {
		if !served[name] {
			t.Errorf("the dashboard or the alerts read %s, which the host does not serve", name)
		}
	}
	for _, name := range []string{"polyop_sidecar_calls_total", "polyop_sidecar_up", "polyop_children_total", "workqueue_depth"} {
		if !slices.Contains(names, name) {
			t.Errorf("neither the dashboard nor the alerts read %s", name)
		}
	}
}

// servedNames are the names of the series a scrape serves: each metric's
// name, and for a histogram or summary the names of its series (_bucket,
// _sum, _count).
func servedNames(scrape string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.SplitSeq(scrape, "\n") {
		fields := strings.Fields(line)
		if len(fields) != 4 || fields[0] != "#" || fields[1] != "TYPE" {
			continue
		}
		name := fields[2]
		switch fields[3] {
		case "histogram":
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case "summary":
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	return names
}

// buildPromcheck builds hack/tools/promcheck, a module of its own (outside
// the workspace), into the test's temporary directory. The first build
// compiles Prometheus's parsers (a minute or two); go's build cache keeps
// them.
func buildPromcheck(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "promcheck")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(testenv.RepoRoot(), "hack", "tools", "promcheck")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building hack/tools/promcheck: %v\n%s", err, out)
	}
	return bin
}

// get returns the body of a GET of url.
func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}
