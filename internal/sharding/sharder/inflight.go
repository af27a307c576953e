package sharder

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// InFlight tracks the reconciles in flight in one replica, by object, so
// that a drain lets go of an object only once none is. Every controller of
// the replica that reconciles the primary kind shares one. The zero value is
// not usable: use NewInFlight.
type InFlight struct {
	mu       sync.Mutex
	running  map[types.NamespacedName]int
	draining map[types.NamespacedName]bool
	idle     map[types.NamespacedName]chan struct{} // closed when running drops to 0
}

// NewInFlight returns an empty tracker.
func NewInFlight() *InFlight {
	return &InFlight{
		running:  map[types.NamespacedName]int{},
		draining: map[types.NamespacedName]bool{},
		idle:     map[types.NamespacedName]chan struct{}{},
	}
}

// Begin records a reconcile of key starting and reports true, or reports
// false (and records nothing) while key is being drained: the caller must
// not reconcile it then. Each true Begin is followed by one End.
func (f *InFlight) Begin(key types.NamespacedName) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.draining[key] {
		return false
	}
	f.running[key]++
	return true
}

// End records a reconcile of key that Begin let start as finished.
func (f *InFlight) End(key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running[key]--
	if f.running[key] > 0 {
		return
	}
	delete(f.running, key)
	if ch, ok := f.idle[key]; ok {
		close(ch)
		delete(f.idle, key)
	}
}

// Running is the number of reconciles of key in flight.
func (f *InFlight) Running(key types.NamespacedName) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[key]
}

// Drain makes Begin refuse key, then waits until no reconcile of key is in
// flight. It returns done, which lets Begin accept key again, once the
// caller has let go of the object (or given up); it returns ctx's error, with
// Begin accepting key again, when ctx ends first. Drains of one key do not
// overlap: a second waits for the first's done.
func (f *InFlight) Drain(ctx context.Context, key types.NamespacedName) (done func(), err error) {
	for {
		f.mu.Lock()
		if !f.draining[key] {
			break
		}
		// Another drain of key holds it: wait for its done, as for a reconcile.
		wait := f.idleLocked(key)
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait:
		}
	}
	f.draining[key] = true
	release := func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.draining, key)
		if ch, ok := f.idle[key]; ok && f.running[key] == 0 {
			close(ch)
			delete(f.idle, key)
		}
	}
	for f.running[key] > 0 {
		wait := f.idleLocked(key)
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		case <-wait:
		}
		f.mu.Lock()
	}
	f.mu.Unlock()
	return release, nil
}

// idleLocked is the channel closed when key next has no reconcile in flight
// and no drain holding it. f.mu is held.
func (f *InFlight) idleLocked(key types.NamespacedName) chan struct{} {
	ch, ok := f.idle[key]
	if !ok {
		ch = make(chan struct{})
		f.idle[key] = ch
	}
	return ch
}
