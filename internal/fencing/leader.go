package fencing

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// LeaderLock is a leader election resource lock that is also the Fence of
// the replica it elects. It wraps the lock client-go's leader elector
// reads and writes, and records when each of its own writes of the lock
// began: the replica's term lasts RenewDeadline from the start of its last
// successful write.
//
// client-go's elector itself goes on believing it leads, after a pause,
// until a renewal fails for RenewDeadline: for that long a paused leader
// that resumes would still reconcile. Its Fence says at once that the term
// has ended.
type LeaderLock struct {
	resourcelock.Interface
	renewDeadline time.Duration
	clock         clock.PassiveClock
	lease         string
	recorder      atomic.Pointer[record.EventRecorder]

	mu sync.Mutex
	// renewed is the start of the last successful write that left the
	// replica the holder; zero before the first.
	renewed time.Time
	number  uint64
}

var (
	_ resourcelock.Interface = &LeaderLock{}
	_ Fence                  = &LeaderLock{}
)

// NewLeaderLock wraps lock, whose leader elector renews it within
// renewDeadline (controller-runtime's RenewDeadline).
func NewLeaderLock(lock resourcelock.Interface, renewDeadline time.Duration) *LeaderLock {
	return &LeaderLock{Interface: lock, renewDeadline: renewDeadline, clock: clock.RealClock{}, lease: "leader election Lease " + lock.Describe()}
}

// SetRecorder records the leader election's events with rec (the lock
// cannot have the manager's recorder when it is made, before the manager).
func (l *LeaderLock) SetRecorder(rec record.EventRecorder) { l.recorder.Store(&rec) }

// Create implements resourcelock.Interface.
func (l *LeaderLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.clock.Now()
	err := l.Interface.Create(ctx, ler)
	l.wrote(start, ler, err)
	return err
}

// Update implements resourcelock.Interface.
func (l *LeaderLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.clock.Now()
	err := l.Interface.Update(ctx, ler)
	l.wrote(start, ler, err)
	return err
}

// wrote records a write of the lock begun at start.
func (l *LeaderLock) wrote(start time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return
	}
	if ler.HolderIdentity != l.Identity() {
		// Released (ReleaseOnCancel writes an empty holder): no term.
		l.renewed = time.Time{}
		return
	}
	if l.renewed.IsZero() || !start.Before(l.renewed.Add(l.renewDeadline)) {
		// The first write, or the first after the last term ended.
		l.number++
	}
	l.renewed = start
}

// Term implements Fence: the term lasts RenewDeadline from the start of the
// last successful write of the lock as its holder.
func (l *LeaderLock) Term() Term {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := Term{Number: l.number, Lease: l.lease}
	if !l.renewed.IsZero() {
		t.Until = l.renewed.Add(l.renewDeadline)
		t.Held = l.clock.Now().Before(t.Until)
	}
	return t
}

// RecordEvent implements resourcelock.Interface: the event the Lease lock
// records, through the recorder SetRecorder gave.
func (l *LeaderLock) RecordEvent(s string) {
	rec := l.recorder.Load()
	if rec == nil {
		l.Interface.RecordEvent(s)
		return
	}
	// A lock describes itself as "<namespace>/<name>".
	ns, name, _ := strings.Cut(l.Describe(), "/")
	subject := &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
	}
	(*rec).Eventf(subject, corev1.EventTypeNormal, "LeaderElection", "%v %v", l.Identity(), s)
}
