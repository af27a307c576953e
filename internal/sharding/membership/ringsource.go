package membership

import (
	"context"
	"sync"

	"github.com/polyop/polyop/internal/sharding/ring"
)

// RingSource publishes a Source's rings as the sharding modes read them
// (sharder.RingSource): Current never returns nil, an empty ring until the
// Leases are listed, and Changes returns a channel closed at the next change
// after the call. It is a manager.Runnable that runs on every replica beside
// its Source.
type RingSource struct {
	src  *Source
	subs <-chan struct{}

	mu      sync.Mutex
	changed chan struct{}
}

// NewRingSource returns the RingSource of src.
func NewRingSource(src *Source) *RingSource {
	return &RingSource{src: src, subs: src.Subscribe(), changed: make(chan struct{})}
}

// Current returns the ring of the live members: an empty ring until the
// Leases are listed.
func (r *RingSource) Current() *ring.Ring {
	if c := r.src.Current(); c != nil {
		return c
	}
	return ring.New(nil, 0)
}

// Changes returns a channel closed at the next change of Current after the
// call.
func (r *RingSource) Changes() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// NeedLeaderElection is false: it follows the Source, which runs everywhere.
func (r *RingSource) NeedLeaderElection() bool { return false }

// Start passes on the Source's changes until ctx ends.
func (r *RingSource) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.subs:
			r.mu.Lock()
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
		}
	}
}
