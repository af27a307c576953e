package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/testenv"
)

// A reconcile that writes the status and applies a child causes events of
// its own. A controller declaring skip_unchanged_inputs is not called for
// them; one that does not is. A changed input always calls.
func TestSkipUnchangedInputsSavesTheCallsOfTheHostsOwnWrites(t *testing.T) {
	t.Parallel()
	for _, skip := range []bool{false, true} {
		t.Run(fmt.Sprintf("skip=%v", skip), func(t *testing.T) {
			f := newFixture(t)
			args := []string{"--finalizer", ""}
			if skip {
				args = append(args, "--skip-unchanged-inputs")
			}
			f.startChildSidecar(args...)
			metrics := freePort(t)
			f.startHost("--metrics-bind-address", metrics, "--metrics-secure=false")

			// The Secret is not sent to the sidecar (no send_observed), so
			// applying it changes no input.
			f.createWidget("w", map[string]any{"secrets": []any{"s"}, "value": "one"})
			testenv.Eventually(t, time.Minute, "the status is written and the child applied", func() (bool, string) {
				return phase(f.getWidget("w")) == "Ready" && f.secret("s") != nil, "phase " + phase(f.getWidget("w"))
			})
			skipped := func() float64 {
				s, err := f.scrapeMetrics(metrics)
				if err != nil {
					return 0
				}
				return metric(s, "polyop_sidecar_calls_skipped_total", "controller", "widget")
			}

			if !skip {
				// The status write's event calls the sidecar again.
				testenv.Eventually(t, time.Minute, "the sidecar is called for the host's own status write", func() (bool, string) {
					n := len(f.widgetCalls("w", "Reconcile"))
					return n >= 2, fmt.Sprintf("%d calls", n)
				})
				if got := skipped(); got != 0 {
					t.Errorf("polyop_sidecar_calls_skipped_total = %v without the option, want 0", got)
				}
				return
			}

			// The host counts the reconciles it answered itself; once it has
			// and is idle, the sidecar has still been called once.
			testenv.Eventually(t, time.Minute, "the events of the host's own writes are skipped", func() (bool, string) {
				n := skipped()
				return n >= 1 && f.idle(metrics, "widget"), fmt.Sprintf("%v skipped", n)
			})
			if n := len(f.widgetCalls("w", "Reconcile")); n != 1 {
				t.Errorf("the sidecar was called %d times, want 1: the status write and child apply must not call it", n)
			}

			// A changed input calls.
			u := f.setSpec("w", map[string]any{"secrets": []any{"s"}, "value": "two"})
			testenv.Eventually(t, time.Minute, "the spec change is reconciled", func() (bool, string) {
				calls := f.widgetCalls("w", "Reconcile")
				last := calls[len(calls)-1]
				return last.Generation == u.GetGeneration(), fmt.Sprintf("%d calls, last at generation %d", len(calls), last.Generation)
			})
			testenv.Eventually(t, time.Minute, "the child is updated", func() (bool, string) {
				s := f.secret("s")
				return s != nil && string(s.Data["value"]) == "two", "not yet"
			})
		})
	}
}
