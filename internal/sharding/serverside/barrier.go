package serverside

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/polyop/polyop/internal/sharding/membership"
	"github.com/polyop/polyop/internal/sharding/ring"
	"github.com/polyop/polyop/internal/sharding/sharder"
)

// Publisher writes the ring a replica adopted into its Lease:
// membership.Member.
type Publisher interface {
	// Publish returns once a write of the Lease carrying adopted has
	// succeeded.
	Publish(ctx context.Context, adopted string) error
}

// LeaseReader reads the ring's Leases: membership.Source.
type LeaseReader interface {
	// Leases are the Leases as the informer last saw them.
	Leases() []membership.MemberLease
	// ReadLeases is a consistent read of the Leases from the API server.
	ReadLeases(ctx context.Context) ([]membership.MemberLease, error)
	// SubscribeLeases tells of each change of the Leases seen.
	SubscribeLeases() <-chan struct{}
}

// BarrierOptions configure a Barrier.
type BarrierOptions struct {
	// Member is this replica's name in the ring. Required.
	Member string
	// Ring publishes the ring of live members. Required.
	Ring sharder.RingSource
	// Publisher writes the adopted ring into the replica's Lease. Required.
	Publisher Publisher
	// Leases reads the other members' Leases. Required.
	Leases LeaseReader
	// Retry is how soon the Barrier reads the Leases again while another
	// member has not adopted the ring, without any Lease event, and tries a
	// failed write again. Defaults to 1s.
	Retry time.Duration
}

// Verdict is what Begin says of a reconcile.
type Verdict int

const (
	// Begun: reconcile the object, then call End.
	Begun Verdict = iota
	// NotOwned: the ring the replica reconciles by gives the object to
	// another member (the cache may still hold it a moment after it left the
	// share). Do not reconcile it.
	NotOwned
	// Waiting: the object is the replica's, but a handoff is under way: the
	// replica is letting go of it for a new ring, or another member has not
	// yet adopted the replica's ring. Look at it again shortly.
	Waiting
)

// Barrier decides when a replica may reconcile an object of the primary
// kind. It is a manager.Runnable that runs on every replica.
//
// A replica reconciles an object only when the ring it has adopted gives it
// the object and every other member of that ring has adopted the same ring.
// It adopts each new ring of the Ring source in this order: it stops
// beginning reconciles of the objects the new ring gives others, waits until
// those in flight have ended, takes the new ring as its own, writes the
// ring's ID into its Lease and then reads the Leases from the API server,
// until every other member of the ring shows the same ID. So two replicas
// cannot have one object in flight at once: each began only after reading,
// after its own write, that the other had adopted its ring, and the later of
// the two reads shows the other's latest write, which came after the other
// let go of the object.
type Barrier struct {
	opts BarrierOptions

	mu sync.Mutex
	// adopted is the ring the replica reconciles by, nil until the first;
	// cleared is true once every other member of it has adopted it.
	adopted *ring.Ring
	cleared bool
	// leaving, while the replica adopts a new ring, is that ring: no
	// reconcile of an object it gives another member begins.
	leaving *ring.Ring
	// previous is the ring adopted before adopted, nil before the second;
	// confirmed holds the objects adopted gave the replica that previous
	// gave another member, once their cached version has been found current
	// (NeedsRead, Confirm).
	previous  *ring.Ring
	confirmed map[types.UID]bool
	// running counts the reconciles in flight by object, with its UID.
	running map[types.NamespacedName]*flight
	// ended is closed, and replaced, whenever a reconcile ends.
	ended chan struct{}
}

type flight struct {
	uid types.UID
	n   int
}

var _ manager.LeaderElectionRunnable = &Barrier{}

// NewBarrier returns the Barrier opts describe.
func NewBarrier(opts BarrierOptions) (*Barrier, error) {
	if opts.Member == "" || opts.Ring == nil || opts.Publisher == nil || opts.Leases == nil {
		return nil, fmt.Errorf("sharding: the handoff barrier needs a member name, a ring source, a publisher and a lease reader")
	}
	if opts.Retry <= 0 {
		opts.Retry = time.Second
	}
	return &Barrier{opts: opts, running: map[types.NamespacedName]*flight{}, ended: make(chan struct{})}, nil
}

// NeedLeaderElection is false: every replica reconciles.
func (b *Barrier) NeedLeaderElection() bool { return false }

// Begin decides whether a reconcile of the object key, with this UID, may
// start, and records it in flight when it may (Begun): call End after it.
func (b *Barrier) Begin(key types.NamespacedName, uid types.UID) Verdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.adopted == nil:
		return Waiting
	case b.adopted.OwnerOf(uid) != b.opts.Member:
		if b.opts.Ring.Current().OwnerOf(uid) == b.opts.Member {
			return Waiting // the next ring gives it to the replica
		}
		return NotOwned
	case b.leaving != nil && b.leaving.OwnerOf(uid) != b.opts.Member, !b.cleared:
		return Waiting
	}
	f := b.running[key]
	if f == nil {
		f = &flight{}
		b.running[key] = f
	}
	f.uid = uid
	f.n++
	return Begun
}

// End records the end of a reconcile Begin let start.
func (b *Barrier) End(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f := b.running[key]; f != nil {
		if f.n--; f.n <= 0 {
			delete(b.running, key)
		}
	}
	close(b.ended)
	b.ended = make(chan struct{})
}

// NeedsRead reports whether the replica must read the object with this UID
// from the API server before it trusts its cache: the ring it adopted gave
// it the object, which the ring before gave another member. The cache of
// such an object comes from a list made when the share changed, and until
// that list is in it, the cache may still hold the version of the last time
// the replica owned the object, as old as that is. A replica's first ring
// needs no read: its cache was listed for it.
func (b *Barrier) NeedsRead(uid types.UID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.previous != nil && b.previous.OwnerOf(uid) != b.opts.Member && !b.confirmed[uid]
}

// Confirm records that the cached object with this UID was found current
// since the ring was adopted.
func (b *Barrier) Confirm(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.confirmed != nil {
		b.confirmed[uid] = true
	}
}

// Adopted returns the ring the replica reconciles by (nil before the first)
// and whether every other member of it has adopted it.
func (b *Barrier) Adopted() (*ring.Ring, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.adopted, b.cleared
}

// Start adopts each ring the Ring source publishes, until ctx ends.
func (b *Barrier) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithValues("member", b.opts.Member)
	leaseChanges := b.opts.Leases.SubscribeLeases()
	for {
		changed := b.opts.Ring.Changes()
		current := b.opts.Ring.Current()
		adopted, cleared := b.Adopted()
		if adopted == nil && current.Len() == 0 {
			// No member yet (the Leases are not listed, say): a ring that
			// owns nothing is not worth a Lease write. Wait for one.
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
			}
			continue
		}
		if adopted == nil || adopted.ID() != current.ID() {
			if b.adopt(ctx, current, log) != nil {
				return nil // ctx ended
			}
			continue
		}
		var retry <-chan time.Time
		if !cleared {
			if b.clear(ctx, adopted, log) {
				continue
			}
			retry = time.After(b.opts.Retry)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-leaseChanges:
		case <-retry:
		}
	}
}

// adopt lets go of the objects r gives others, takes r as the replica's
// ring and publishes it. It returns an error only when ctx ends.
func (b *Barrier) adopt(ctx context.Context, r *ring.Ring, log logr.Logger) error {
	start := time.Now()
	b.mu.Lock()
	b.leaving = r
	for {
		busy := 0
		for _, f := range b.running {
			if r.OwnerOf(f.uid) != b.opts.Member {
				busy++
			}
		}
		if busy == 0 {
			break
		}
		ended := b.ended
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			b.mu.Lock()
			b.leaving = nil
			b.mu.Unlock()
			return ctx.Err()
		case <-ended:
		}
		b.mu.Lock()
	}
	b.previous, b.adopted, b.cleared, b.leaving = b.adopted, r, false, nil
	b.confirmed = map[types.UID]bool{}
	b.mu.Unlock()
	for {
		err := b.opts.Publisher.Publish(ctx, r.ID())
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Error(err, "publishing the adopted ring in the shard Lease failed; retrying", "ring", r.ID(), "members", r.Members())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.opts.Retry):
		}
	}
	log.Info("adopted the shard ring", "ring", r.ID(), "members", r.Members(), "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// clear reads the Leases and, when every other member of r shows it adopted
// r, lets the replica reconcile by r. It reports whether it did. The
// informer's Leases are looked at first: while they show a member waiting,
// no read is made (a stale cache can only hold the barrier back); the
// decision is the consistent read's.
func (b *Barrier) clear(ctx context.Context, r *ring.Ring, log logr.Logger) bool {
	if waiting := b.waitingFor(r, b.opts.Leases.Leases()); len(waiting) > 0 {
		log.V(1).Info("waiting for the other members to adopt the shard ring", "ring", r.ID(), "waitingFor", waiting)
		return false
	}
	leases, err := b.opts.Leases.ReadLeases(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Error(err, "reading the ring's Leases to see which members adopted the ring", "ring", r.ID())
		}
		return false
	}
	if waiting := b.waitingFor(r, leases); len(waiting) > 0 {
		log.V(1).Info("waiting for the other members to adopt the shard ring", "ring", r.ID(), "waitingFor", waiting)
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.adopted != r {
		return false
	}
	b.cleared = true
	log.Info("every member adopted the shard ring: reconciling by it", "ring", r.ID(), "members", r.Members())
	return true
}

// waitingFor are the members of r other than this replica whose Lease, in
// leases, does not show r adopted.
func (b *Barrier) waitingFor(r *ring.Ring, leases []membership.MemberLease) []string {
	id := r.ID()
	var waiting []string
	for _, m := range r.Members() {
		if m == b.opts.Member {
			continue
		}
		if !slices.ContainsFunc(leases, func(l membership.MemberLease) bool { return l.Holder == m && l.AdoptedRing == id }) {
			waiting = append(waiting, m)
		}
	}
	return waiting
}
