package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	"github.com/polyop/polyop/sdk/go/conditions"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// The annotations that drive a reconcile.
const (
	annotationFailTimes    = "e2e.polyop.dev/fail-times"
	annotationTerminal     = "e2e.polyop.dev/terminal"
	annotationRequeueAfter = "e2e.polyop.dev/requeue-after"
	// annotationDelay makes a reconcile of this object sleep this long
	// first (after --delay), to drive the host's Reconcile timeout.
	annotationDelay = "e2e.polyop.dev/delay"
	// annotationBusy makes a reconcile of this object work this long
	// first, ignoring its context (as a handler that cannot be cancelled
	// does, a synchronous Python one say): the sidecar answers the call
	// only then, however long past its deadline.
	annotationBusy = "e2e.polyop.dev/busy"
	// annotationBadStatus makes the answer's status a JSON array (or, with
	// the value "not-json", not JSON at all), which the host must refuse (see
	// garbleStatus).
	annotationBadStatus = "e2e.polyop.dev/bad-status"
	// annotationStatusSize makes the answer's status a JSON object of that
	// many bytes (a Kubernetes quantity such as 60Mi), which the host must
	// refuse unread when it is over its limit (see garbleStatus).
	annotationStatusSize = "e2e.polyop.dev/status-size"
)

// PhaseReconciled is the phase of a window this sidecar reconciled.
const PhaseReconciled v1.MaintenanceWindowPhase = "Reconciled"

// reconciler does what each object's annotations tell it to.
type reconciler struct {
	// delay is how long each reconcile sleeps first.
	delay time.Duration
	// calls records every call; nil records nothing.
	calls *callLog
	// overlaps detects reconciles of one object in flight at once, across
	// sidecars; empty detects nothing.
	overlaps overlapDetector
	// instance names this sidecar in the call log and the Ready condition.
	instance string
	// childConfigMap makes each reconcile desire a ConfigMap named after
	// the window.
	childConfigMap bool
	// exitEvery makes the process exit on receiving every exitEvery-th
	// Reconcile call; 0 never. received counts them.
	exitEvery int64
	received  atomic.Int64
	// childGeneration puts the window's generation in its ConfigMap, so
	// that a child written from an older view shows it.
	childGeneration bool
	// freezer stops the process of --freeze-pid-file for a window with
	// annotationFreezeHost.
	freezer freezer
}

var (
	_ sidecar.Reconciler[*v1.MaintenanceWindow] = (*reconciler)(nil)
	_ sidecar.DeletionReconciler                = (*reconciler)(nil)
)

func (r *reconciler) Reconcile(ctx context.Context, mw *v1.MaintenanceWindow) (sidecar.Result, error) {
	req, _ := sidecar.RequestFromContext(ctx)
	if n := r.received.Add(1); r.exitEvery > 0 && n%r.exitEvery == 0 {
		fmt.Fprintf(os.Stderr, "testsidecar: exiting on Reconcile call %d (--exit-every %d), for %s/%s\n", n, r.exitEvery, mw.Namespace, mw.Name)
		os.Exit(3)
	}
	release, err := r.overlaps.begin(mw.Namespace, mw.Name)
	if err != nil {
		return sidecar.Result{}, err
	}
	defer release()
	if err := r.calls.record(call{
		Instance:        r.instance,
		Namespace:       mw.Namespace,
		Name:            mw.Name,
		Exists:          true,
		Generation:      mw.Generation,
		ResourceVersion: mw.ResourceVersion,
		Retries:         req.Retries,
	}); err != nil {
		return sidecar.Result{}, err
	}
	if err := sleep(ctx, r.delay); err != nil {
		return sidecar.Result{}, err
	}

	annotations := mw.GetAnnotations()
	if when, ok := annotations[annotationFreezeHost]; ok {
		after, err := r.freezer.freeze(when)
		if err != nil {
			return sidecar.Result{}, sidecar.TerminalError(err)
		}
		if after != nil {
			defer after()
		}
	}
	if value, ok := annotations[annotationBusy]; ok {
		d, err := time.ParseDuration(value)
		if err != nil {
			return sidecar.Result{}, sidecar.TerminalError(fmt.Errorf("annotation %s: %q is not a duration", annotationBusy, value))
		}
		time.Sleep(d)
	}
	if value, ok := annotations[annotationDelay]; ok {
		d, err := time.ParseDuration(value)
		if err != nil {
			return sidecar.Result{}, sidecar.TerminalError(fmt.Errorf("annotation %s: %q is not a duration", annotationDelay, value))
		}
		if err := sleep(ctx, d); err != nil {
			return sidecar.Result{}, err
		}
	}
	if value, ok := annotations[annotationFailTimes]; ok {
		n, err := strconv.Atoi(value)
		if err != nil {
			return sidecar.Result{}, sidecar.TerminalError(fmt.Errorf("annotation %s: %q is not a number", annotationFailTimes, value))
		}
		if req.Retries < n {
			return sidecar.Result{}, errors.New("injected failure")
		}
	}
	if message, ok := annotations[annotationTerminal]; ok {
		return sidecar.Result{}, sidecar.TerminalError(errors.New(message))
	}
	var result sidecar.Result
	if value, ok := annotations[annotationRequeueAfter]; ok {
		d, err := time.ParseDuration(value)
		if err != nil {
			return sidecar.Result{}, sidecar.TerminalError(fmt.Errorf("annotation %s: %q is not a duration", annotationRequeueAfter, value))
		}
		result.RequeueAfter = d
	}

	if r.childConfigMap {
		child := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: mw.Namespace, Name: mw.Name},
			Data:       map[string]string{"window": mw.Name},
		}
		if r.childGeneration {
			child.Data["generation"] = strconv.FormatInt(mw.Generation, 10)
		}
		if err := sidecar.Desire(ctx, child); err != nil {
			return sidecar.Result{}, err
		}
	}
	if mw.Status.ObservedGeneration != mw.Generation {
		sidecar.Recorder(ctx).Eventf(corev1.EventTypeNormal, "Reconciled", "Reconciled generation %d", mw.Generation)
	}
	mw.Status.Phase = PhaseReconciled
	mw.Status.ObservedGeneration = mw.Generation
	by := "testsidecar"
	if r.instance != "" {
		by = r.instance
	}
	conditions.MarkTrue(&mw.Status.Conditions, conditions.Ready, "Reconciled", "Reconciled by "+by, mw.Generation)
	return result, nil
}

func (r *reconciler) ReconcileDeleted(_ context.Context, req sidecar.Request) (sidecar.Result, error) {
	release, err := r.overlaps.begin(req.Namespace, req.Name)
	if err != nil {
		return sidecar.Result{}, err
	}
	defer release()
	return sidecar.Result{}, r.calls.record(call{
		Instance:  r.instance,
		Namespace: req.Namespace,
		Name:      req.Name,
		Retries:   req.Retries,
	})
}

// sleep waits for d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call is one line of the call log.
type call struct {
	Time            string `json:"time"`
	Instance        string `json:"instance,omitempty"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	Exists          bool   `json:"exists"`
	Generation      int64  `json:"generation,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Retries         int    `json:"retries"`
}

// callLog appends one JSON line per call to a file. A nil *callLog records
// nothing.
type callLog struct {
	mu   sync.Mutex
	file *os.File
	now  func() time.Time
}

func openCallLog(path string) (*callLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log file: %w", err)
	}
	return &callLog{file: f, now: time.Now}, nil
}

// record appends c, stamped with the time, in a single write: the file is not
// buffered, so a test tailing it sees whole lines at once.
func (l *callLog) record(c call) error {
	if l == nil {
		return nil
	}
	c.Time = l.now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("writing the log file: %w", err)
	}
	return nil
}

func (l *callLog) Close() error {
	if l == nil {
		return nil
	}
	return l.file.Close()
}

// overlapDetector is a directory shared by sidecars (test/e2e's sharding
// test runs one per host replica) where each reconcile of an object holds a
// lock file, created exclusively, for as long as it runs. Two reconciles of
// one object in flight at once, in any of the sidecars, cannot both create
// it: the second finds it and appends a line to overlaps.log, so the
// detector misses no overlap, however short.
type overlapDetector string

// begin takes the object's lock, recording an overlap if another reconcile
// holds it; release gives the lock up (if it was taken).
func (d overlapDetector) begin(namespace, name string) (release func(), err error) {
	if d == "" {
		return func() {}, nil
	}
	lock := filepath.Join(string(d), namespace+"_"+name+".lock")
	me := fmt.Sprintf("pid %d at %s", os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano))
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("taking the overlap lock of %s/%s: %w", namespace, name, err)
		}
		holder, _ := os.ReadFile(lock)
		line := fmt.Sprintf("%s/%s: reconciled by %s while in flight since %s\n", namespace, name, me, holder)
		log, err := os.OpenFile(filepath.Join(string(d), "overlaps.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("recording an overlap of %s/%s: %w", namespace, name, err)
		}
		defer log.Close()
		if _, err := log.WriteString(line); err != nil {
			return nil, fmt.Errorf("recording an overlap of %s/%s: %w", namespace, name, err)
		}
		return func() {}, nil
	}
	_, werr := f.WriteString(me)
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(lock)
		return nil, fmt.Errorf("taking the overlap lock of %s/%s: %w", namespace, name, err)
	}
	return func() { _ = os.Remove(lock) }, nil
}
