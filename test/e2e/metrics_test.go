package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/polyop/polyop/internal/testenv"
)

// This file reads the host's Prometheus metrics (controller-runtime's, with
// their names unchanged), so that tests assert on what the host counted
// rather than on what did not happen within a quiet window.

// scrapeMetrics reads the host's metrics endpoint at addr.
func (f *fixture) scrapeMetrics(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return string(body), nil
}

// metric sums the samples of the metric name in a scrape whose labels include
// every name=value pair of labels.
func metric(scrape, name string, labels ...string) float64 {
	total := 0.0
	for line := range strings.SplitSeq(scrape, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		var have string
		if rest[0] == '{' {
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				continue
			}
			have, rest = rest[1:end], rest[end+1:]
		}
		matches := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(","+have+",", fmt.Sprintf(",%s=%q,", labels[i], labels[i+1])) {
				matches = false
				break
			}
		}
		if !matches {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
			total += v
		}
	}
	return total
}

// waitIdle waits until the controller's workqueue is empty and none of its
// workers is busy: every request queued so far has been reconciled to the
// end (sidecar call, children, status). A request queued later (a retry with
// backoff, a requeue_after, an event still on its way) is not waited for.
func (f *fixture) waitIdle(metricsAddr, controller string) {
	f.t.Helper()
	testenv.Eventually(f.t, 2*time.Minute, "controller "+controller+" is idle", func() (bool, string) {
		return f.idle(metricsAddr, controller), "busy"
	})
}

// idle reports whether the controller's workqueue is empty and none of its
// workers is busy.
func (f *fixture) idle(metricsAddr, controller string) bool {
	s, err := f.scrapeMetrics(metricsAddr)
	if err != nil {
		return false
	}
	// The gauge is there once the controller has started.
	started := strings.Contains(s, `controller_runtime_active_workers{controller="`+controller+`"}`)
	return started && metric(s, "workqueue_depth", "controller", controller) == 0 &&
		metric(s, "controller_runtime_active_workers", "controller", controller) == 0
}

// retries is the number of requests the controller's workqueue took with a
// delay: retries with backoff and requeue_after.
func (f *fixture) retries(metricsAddr, controller string) float64 {
	f.t.Helper()
	s, err := f.scrapeMetrics(metricsAddr)
	if err != nil {
		f.t.Fatalf("scraping the host's metrics: %v", err)
	}
	return metric(s, "workqueue_retries_total", "controller", controller)
}

// waitSettled waits until no reconcile of the Widget name is pending: the
// controller is idle and its last reconcile of name saw the Widget as it is
// now, so no write to it (its status, say) is still to be reconciled.
func (f *fixture) waitSettled(metricsAddr, name string) {
	f.t.Helper()
	f.waitIdle(metricsAddr, "widget")
	testenv.Eventually(f.t, 2*time.Minute, name+" is settled", func() (bool, string) {
		calls := f.widgetCalls(name, "Reconcile")
		u := f.getWidget(name)
		if len(calls) == 0 || u == nil {
			return false, fmt.Sprintf("%d calls", len(calls))
		}
		seen := calls[len(calls)-1].ResourceVersion
		if seen != u.GetResourceVersion() {
			return false, fmt.Sprintf("last reconciled at resourceVersion %s, now %s", seen, u.GetResourceVersion())
		}
		if !f.idle(metricsAddr, "widget") {
			return false, "the controller is busy"
		}
		// Still the same version, after the reconcile that saw it ended.
		return f.getWidget(name).GetResourceVersion() == seen, "written during the last reconcile"
	})
}
