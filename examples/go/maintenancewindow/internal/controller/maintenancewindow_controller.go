package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	"github.com/polyop/polyop/sdk/go/conditions"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// ControllerName is the name of the MaintenanceWindow controller.
const ControllerName = "maintenancewindow"

// Reasons, of conditions and events.
const (
	ReasonInvalidSpec     = "InvalidSpec"
	ReasonSpecValid       = "SpecValid"
	ReasonPaused          = "Paused"
	ReasonWindowOpen      = "WindowOpen"
	ReasonWindowPending   = "WindowPending"
	ReasonFinished        = "Finished"
	ReasonWindowOpened    = "WindowOpened"
	ReasonWindowClosed    = "WindowClosed"
	ReasonWindowScheduled = "WindowScheduled"
)

// MaintenanceWindowReconciler computes a MaintenanceWindow's status from its
// spec and the clock.
type MaintenanceWindowReconciler struct {
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
}

// SetupWithServer registers the controller on srv. Status updates do not
// change the generation, so they do not reconcile again; transitions are
// reached through RequeueAfter.
func (r *MaintenanceWindowReconciler) SetupWithServer(srv *sidecar.Server) error {
	return sidecar.NewControllerManagedBy[*v1.MaintenanceWindow](srv).
		Named(ControllerName).
		WithUpdateFilters(sidecar.GenerationChanged).
		Complete(r)
}

// Reconcile sets the window's phase, current window, next transition and
// conditions, records an event when the phase changes and requeues the window
// at its next transition. An invalid spec is a terminal error: nothing changes
// until the spec does.
func (r *MaintenanceWindowReconciler) Reconcile(ctx context.Context, mw *v1.MaintenanceWindow) (sidecar.Result, error) {
	log := logf.FromContext(ctx)
	events := sidecar.Recorder(ctx)
	status := &mw.Status
	previous := status.Phase
	status.ObservedGeneration = mw.Generation

	sched, errs := parseSchedule(mw.Spec)
	if len(errs) > 0 {
		message := errs.ToAggregate().Error()
		setWindow(status, v1.PhaseInvalid, time.Time{}, time.Time{}, time.Time{})
		conditions.MarkTrue(&status.Conditions, conditions.Degraded, ReasonInvalidSpec, message, mw.Generation)
		conditions.MarkFalse(&status.Conditions, conditions.Ready, ReasonInvalidSpec, message, mw.Generation)
		if previous != v1.PhaseInvalid {
			events.Event(corev1.EventTypeWarning, ReasonInvalidSpec, message)
		}
		return sidecar.Result{}, sidecar.TerminalError(fmt.Errorf("invalid spec: %s", message))
	}
	conditions.MarkFalse(&status.Conditions, conditions.Degraded, ReasonSpecValid, "The spec is valid", mw.Generation)

	if mw.Spec.Paused {
		setWindow(status, v1.PhasePaused, time.Time{}, time.Time{}, time.Time{})
		conditions.MarkTrue(&status.Conditions, conditions.Ready, ReasonPaused, "The schedule is paused", mw.Generation)
		if previous != v1.PhasePaused {
			events.Event(corev1.EventTypeNormal, ReasonPaused, "The schedule is paused")
		}
		return sidecar.Result{}, nil
	}

	now := r.now()
	w := sched.at(now)
	setWindow(status, w.phase, w.start, w.end, w.next)
	reason, message := describe(w)
	conditions.MarkTrue(&status.Conditions, conditions.Ready, reason, message, mw.Generation)
	if previous != w.phase {
		recordTransition(events, previous, w)
	}
	log.V(1).Info("Computed the window", "phase", w.phase, "nextTransition", w.next)

	if w.next.IsZero() {
		return sidecar.Result{}, nil
	}
	return sidecar.Result{RequeueAfter: w.next.Sub(now)}, nil
}

func (r *MaintenanceWindowReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// setWindow sets the phase and the times of the status; a zero time unsets
// its field.
func setWindow(status *v1.MaintenanceWindowStatus, phase v1.MaintenanceWindowPhase, start, end, next time.Time) {
	status.Phase = phase
	status.CurrentWindowStart = timeOrNil(start)
	status.CurrentWindowEnd = timeOrNil(end)
	status.NextTransition = timeOrNil(next)
}

func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}

// describe returns the Ready condition's reason and message for a window.
func describe(w window) (reason, message string) {
	switch w.phase {
	case v1.PhaseActive:
		return ReasonWindowOpen, "The maintenance window is open until " + w.end.UTC().Format(time.RFC3339)
	case v1.PhasePending:
		return ReasonWindowPending, "The next maintenance window opens at " + w.start.UTC().Format(time.RFC3339)
	default:
		return ReasonFinished, "The maintenance window has passed and does not recur"
	}
}

// recordTransition records the event of a change of phase.
func recordTransition(events sidecar.EventRecorder, previous v1.MaintenanceWindowPhase, w window) {
	switch {
	case w.phase == v1.PhaseActive:
		events.Event(corev1.EventTypeNormal, ReasonWindowOpened,
			"The maintenance window opened; it closes at "+w.end.UTC().Format(time.RFC3339))
	case previous == v1.PhaseActive && w.phase == v1.PhasePending:
		events.Event(corev1.EventTypeNormal, ReasonWindowClosed,
			"The maintenance window closed; the next one opens at "+w.start.UTC().Format(time.RFC3339))
	case previous == v1.PhaseActive:
		events.Event(corev1.EventTypeNormal, ReasonWindowClosed, "The maintenance window closed; it does not recur")
	case w.phase == v1.PhasePending:
		events.Event(corev1.EventTypeNormal, ReasonWindowScheduled,
			"The next maintenance window opens at "+w.start.UTC().Format(time.RFC3339))
	default:
		events.Event(corev1.EventTypeNormal, ReasonFinished, "The maintenance window has passed and does not recur")
	}
}
