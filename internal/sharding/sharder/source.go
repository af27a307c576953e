package sharder

import (
	"sync"

	"github.com/polyop/polyop/internal/sharding/ring"
)

// RingSource publishes the ring of live members, as the sharding membership
// computes it from the ring's Leases.
//
// Current returns the ring as it is now; a member not in it is dead. It never
// returns nil: an empty ring has no members.
//
// Changes returns a channel that is closed at the next change of Current
// after the call. Each call returns the channel of the next change, so a
// consumer that calls Changes before Current misses no change:
//
//	for {
//		changed := src.Changes()
//		r := src.Current()
//		// ... act on r ...
//		<-changed
//	}
//
// Implementations are safe for concurrent use.
type RingSource interface {
	Current() *ring.Ring
	Changes() <-chan struct{}
}

// StaticSource is a RingSource whose ring is set by hand: for tests, and for
// a fixed membership.
type StaticSource struct {
	mu      sync.Mutex
	current *ring.Ring
	changed chan struct{}
}

var _ RingSource = &StaticSource{}

// NewStaticSource returns a source publishing r (an empty ring when nil).
func NewStaticSource(r *ring.Ring) *StaticSource {
	s := &StaticSource{changed: make(chan struct{})}
	s.current = orEmpty(r)
	return s
}

func orEmpty(r *ring.Ring) *ring.Ring {
	if r == nil {
		return ring.New(nil, 0)
	}
	return r
}

// Current implements RingSource.
func (s *StaticSource) Current() *ring.Ring {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// Changes implements RingSource.
func (s *StaticSource) Changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Set publishes r (an empty ring when nil) and tells every waiting consumer.
func (s *StaticSource) Set(r *ring.Ring) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current = orEmpty(r)
	close(s.changed)
	s.changed = make(chan struct{})
}
