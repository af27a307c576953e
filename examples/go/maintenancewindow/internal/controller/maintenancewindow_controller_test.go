package controller_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	"github.com/polyop/polyop/examples/go/maintenancewindow/internal/controller"
	"github.com/polyop/polyop/sdk/go/conditions"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

// now is the clock of every test.
var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func newHarness(t *testing.T) *sidecartest.Harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	srv, err := sidecar.New(sidecar.Options{Name: "test", Scheme: scheme, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.MaintenanceWindowReconciler{Now: func() time.Time { return now }}
	if err := r.SetupWithServer(srv); err != nil {
		t.Fatal(err)
	}
	return sidecartest.New(t, srv)
}

// window builds a MaintenanceWindow: one that opened an hour ago for two
// hours, unless options change it.
func window(opts ...func(*v1.MaintenanceWindow)) *v1.MaintenanceWindow {
	mw := &v1.MaintenanceWindow{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nightly", Generation: 3},
		Spec:       v1.MaintenanceWindowSpec{Start: now.Add(-time.Hour).Format(time.RFC3339), Duration: "2h"},
	}
	for _, opt := range opts {
		opt(mw)
	}
	return mw
}

func startingAt(start string) func(*v1.MaintenanceWindow) {
	return func(mw *v1.MaintenanceWindow) { mw.Spec.Start = start }
}

func lasting(duration string) func(*v1.MaintenanceWindow) {
	return func(mw *v1.MaintenanceWindow) { mw.Spec.Duration = duration }
}

func every(period string) func(*v1.MaintenanceWindow) {
	return func(mw *v1.MaintenanceWindow) { mw.Spec.Every = period }
}

func paused(mw *v1.MaintenanceWindow) { mw.Spec.Paused = true }

func inPhase(phase v1.MaintenanceWindowPhase) func(*v1.MaintenanceWindow) {
	return func(mw *v1.MaintenanceWindow) { mw.Status.Phase = phase }
}

func at(offset time.Duration) string { return now.Add(offset).Format(time.RFC3339) }

func TestReconcile(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		window *v1.MaintenanceWindow

		wantPhase        v1.MaintenanceWindowPhase
		wantWindow       [2]string // start, end; "" for unset
		wantNext         string    // "" for unset
		wantRequeueAfter time.Duration
		wantReady        metav1.ConditionStatus
		wantReason       string
		wantEvents       []string // "Type/Reason"
		wantTerminal     string   // a part of the terminal error's message; "" for success
	}{
		"if the window has not opened yet, then it is Pending until its start": {
			window:    window(startingAt(at(time.Hour))),
			wantPhase: v1.PhasePending, wantWindow: [2]string{at(time.Hour), at(3 * time.Hour)}, wantNext: at(time.Hour),
			wantRequeueAfter: time.Hour, wantReady: metav1.ConditionTrue, wantReason: controller.ReasonWindowPending,
			wantEvents: []string{"Normal/WindowScheduled"},
		},
		"if the window is open, then it is Active until its end": {
			window:    window(inPhase(v1.PhasePending)),
			wantPhase: v1.PhaseActive, wantWindow: [2]string{at(-time.Hour), at(time.Hour)}, wantNext: at(time.Hour),
			wantRequeueAfter: time.Hour, wantReady: metav1.ConditionTrue, wantReason: controller.ReasonWindowOpen,
			wantEvents: []string{"Normal/WindowOpened"},
		},
		"if the window opens exactly now, then it is Active": {
			window:    window(startingAt(at(0)), inPhase(v1.PhasePending)),
			wantPhase: v1.PhaseActive, wantWindow: [2]string{at(0), at(2 * time.Hour)}, wantNext: at(2 * time.Hour),
			wantRequeueAfter: 2 * time.Hour, wantReady: metav1.ConditionTrue, wantReason: controller.ReasonWindowOpen,
			wantEvents: []string{"Normal/WindowOpened"},
		},
		"if the phase does not change, then no event is recorded": {
			window:    window(inPhase(v1.PhaseActive)),
			wantPhase: v1.PhaseActive, wantWindow: [2]string{at(-time.Hour), at(time.Hour)}, wantNext: at(time.Hour),
			wantRequeueAfter: time.Hour, wantReady: metav1.ConditionTrue, wantReason: controller.ReasonWindowOpen,
		},
		"if a one-time window closes exactly now, then it is Finished and not requeued": {
			window:    window(startingAt(at(-2*time.Hour)), inPhase(v1.PhaseActive)),
			wantPhase: v1.PhaseFinished, wantWindow: [2]string{at(-2 * time.Hour), at(0)},
			wantReady: metav1.ConditionTrue, wantReason: controller.ReasonFinished,
			wantEvents: []string{"Normal/WindowClosed"},
		},
		"if a one-time window passed before it was ever seen, then it is Finished": {
			window:    window(startingAt(at(-48 * time.Hour))),
			wantPhase: v1.PhaseFinished, wantWindow: [2]string{at(-48 * time.Hour), at(-46 * time.Hour)},
			wantReady: metav1.ConditionTrue, wantReason: controller.ReasonFinished,
			wantEvents: []string{"Normal/Finished"},
		},
		"if a recurring window is between occurrences, then it is Pending until the next one": {
			window:    window(startingAt("2026-01-01T00:00:00Z"), every("24h"), inPhase(v1.PhaseActive)),
			wantPhase: v1.PhasePending, wantWindow: [2]string{"2026-03-11T00:00:00Z", "2026-03-11T02:00:00Z"},
			wantNext: "2026-03-11T00:00:00Z", wantRequeueAfter: 12 * time.Hour,
			wantReady: metav1.ConditionTrue, wantReason: controller.ReasonWindowPending,
			wantEvents: []string{"Normal/WindowClosed"},
		},
		"if a recurring window is in an occurrence, then it is Active until that one ends": {
			window:    window(startingAt("2026-01-01T11:30:00Z"), every("24h")),
			wantPhase: v1.PhaseActive, wantWindow: [2]string{"2026-03-10T11:30:00Z", "2026-03-10T13:30:00Z"},
			wantNext: "2026-03-10T13:30:00Z", wantRequeueAfter: 90 * time.Minute,
			wantReady: metav1.ConditionTrue, wantReason: controller.ReasonWindowOpen,
			wantEvents: []string{"Normal/WindowOpened"},
		},
		"if a window recurs back to back, then it is always Active": {
			window:    window(startingAt("2026-01-01T00:00:00Z"), lasting("1h"), every("1h"), inPhase(v1.PhaseActive)),
			wantPhase: v1.PhaseActive, wantWindow: [2]string{at(0), at(time.Hour)}, wantNext: at(time.Hour),
			wantRequeueAfter: time.Hour, wantReady: metav1.ConditionTrue, wantReason: controller.ReasonWindowOpen,
		},
		"if the window is paused, then it is Paused, without times, and not requeued": {
			window:    window(paused, inPhase(v1.PhaseActive)),
			wantPhase: v1.PhasePaused, wantReady: metav1.ConditionTrue, wantReason: controller.ReasonPaused,
			wantEvents: []string{"Normal/Paused"},
		},
		"if start is not an RFC 3339 time, then the window is Invalid and the error terminal": {
			window:    window(startingAt("tomorrow")),
			wantPhase: v1.PhaseInvalid, wantReady: metav1.ConditionFalse, wantReason: controller.ReasonInvalidSpec,
			wantEvents: []string{"Warning/InvalidSpec"}, wantTerminal: "spec.start",
		},
		"if duration is not a duration, then the window is Invalid": {
			window:    window(lasting("2 hours")),
			wantPhase: v1.PhaseInvalid, wantReady: metav1.ConditionFalse, wantReason: controller.ReasonInvalidSpec,
			wantEvents: []string{"Warning/InvalidSpec"}, wantTerminal: "spec.duration",
		},
		"if duration is zero, then the window is Invalid": {
			window:    window(lasting("0s")),
			wantPhase: v1.PhaseInvalid, wantReady: metav1.ConditionFalse, wantReason: controller.ReasonInvalidSpec,
			wantEvents: []string{"Warning/InvalidSpec"}, wantTerminal: "must be positive",
		},
		"if every is shorter than duration, then the window is Invalid": {
			window:    window(every("1h")),
			wantPhase: v1.PhaseInvalid, wantReady: metav1.ConditionFalse, wantReason: controller.ReasonInvalidSpec,
			wantEvents: []string{"Warning/InvalidSpec"}, wantTerminal: "must not be shorter than spec.duration",
		},
		"if every is not a duration, then the window is Invalid": {
			window:    window(every("daily")),
			wantPhase: v1.PhaseInvalid, wantReady: metav1.ConditionFalse, wantReason: controller.ReasonInvalidSpec,
			wantEvents: []string{"Warning/InvalidSpec"}, wantTerminal: "spec.every",
		},
		"if the spec stays invalid, then no new warning is recorded": {
			window:    window(lasting("-1h"), inPhase(v1.PhaseInvalid)),
			wantPhase: v1.PhaseInvalid, wantReady: metav1.ConditionFalse, wantReason: controller.ReasonInvalidSpec,
			wantTerminal: "spec.duration",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := newHarness(t).Reconcile(t.Context(), controller.ControllerName, tc.window)

			switch {
			case tc.wantTerminal == "" && res.Err != nil:
				t.Errorf("unexpected error: %+v", *res.Err)
			case tc.wantTerminal != "" && (res.Err == nil || !res.Err.Terminal || !strings.Contains(res.Err.Message, tc.wantTerminal)):
				t.Errorf("error = %+v, want a terminal one containing %q", res.Err, tc.wantTerminal)
			}
			if res.Result.RequeueAfter != tc.wantRequeueAfter {
				t.Errorf("requeue after = %s, want %s", res.Result.RequeueAfter, tc.wantRequeueAfter)
			}
			var events []string
			for _, e := range res.Events {
				events = append(events, e.Type+"/"+e.Reason)
			}
			if !slices.Equal(events, tc.wantEvents) {
				t.Errorf("events = %v, want %v", events, tc.wantEvents)
			}

			var got v1.MaintenanceWindow
			res.Status(&got)
			st := got.Status
			if st.Phase != tc.wantPhase {
				t.Errorf("phase = %q, want %q", st.Phase, tc.wantPhase)
			}
			if start, end := format(st.CurrentWindowStart), format(st.CurrentWindowEnd); start != tc.wantWindow[0] || end != tc.wantWindow[1] {
				t.Errorf("window = [%q, %q), want [%q, %q)", start, end, tc.wantWindow[0], tc.wantWindow[1])
			}
			if next := format(st.NextTransition); next != tc.wantNext {
				t.Errorf("next transition = %q, want %q", next, tc.wantNext)
			}
			if st.ObservedGeneration != 3 {
				t.Errorf("observed generation = %d, want 3", st.ObservedGeneration)
			}
			ready := conditions.Get(st.Conditions, conditions.Ready)
			if ready == nil || ready.Status != tc.wantReady || ready.Reason != tc.wantReason || ready.ObservedGeneration != 3 {
				t.Errorf("Ready = %+v, want %s/%s", ready, tc.wantReady, tc.wantReason)
			}
			wantDegraded := tc.wantPhase == v1.PhaseInvalid
			if conditions.IsTrue(st.Conditions, conditions.Degraded) != wantDegraded ||
				conditions.IsFalse(st.Conditions, conditions.Degraded) == wantDegraded {
				t.Errorf("Degraded = %+v, want it true: %v", conditions.Get(st.Conditions, conditions.Degraded), wantDegraded)
			}
		})
	}
}

func format(t *metav1.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func TestReconcilingTheResultAgainChangesNothing(t *testing.T) {
	t.Parallel()
	for name, mw := range map[string]*v1.MaintenanceWindow{
		"if the window is active":  window(),
		"if the window is paused":  window(paused),
		"if the window is invalid": window(every("1m")),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			first := h.Reconcile(t.Context(), controller.ControllerName, mw)
			var reconciled v1.MaintenanceWindow
			first.Status(&reconciled)
			second := h.Reconcile(t.Context(), controller.ControllerName, &reconciled)
			if !bytes.Equal(first.Raw.GetStatus(), second.Raw.GetStatus()) {
				t.Errorf("the status changed:\n%s\n%s", first.Raw.GetStatus(), second.Raw.GetStatus())
			}
			if len(second.Events) > 0 {
				t.Errorf("events were recorded again: %+v", second.Events)
			}
		})
	}
}

func TestAGoneWindowNeedsNothing(t *testing.T) {
	t.Parallel()
	res := newHarness(t).ReconcileDeleted(t.Context(), controller.ControllerName, types.NamespacedName{Namespace: "default", Name: "nightly"})
	if res.Err != nil || res.HasStatus() || res.Result != (sidecar.Result{}) {
		t.Errorf("response = %v", res.Raw)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	resp := newHarness(t).Describe()
	c := resp.GetControllers()[0]
	if c.GetName() != controller.ControllerName || c.GetForKind().GetGroup() != "examples.polyop.dev" || c.GetForKind().GetKind() != "MaintenanceWindow" {
		t.Errorf("controller = %v", c)
	}
	if !slices.Equal(c.GetPredicates().GetUpdateFilters(), []sidecar.UpdateFilter{sidecar.GenerationChanged}) {
		t.Errorf("update filters = %v", c.GetPredicates().GetUpdateFilters())
	}
}
