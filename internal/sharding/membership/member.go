package membership

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/polyop/polyop/internal/fencing"
	"github.com/polyop/polyop/internal/sharding"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// DefaultLeaseDuration is how long a member's Lease stays live after each
// renewal unless told otherwise: leader election's default.
const DefaultLeaseDuration = 15 * time.Second

// MemberOptions configure a Member.
type MemberOptions struct {
	// Ring is the ring's name: the sidecar's name. Required; it must be
	// valid as a label value and in the label key sharding.ShardLabel(Ring).
	Ring string
	// ReplicaID names this replica in the ring: its Lease's holderIdentity,
	// and the member the ring assigns objects to. Required, and unique among
	// the ring's replicas: the pod's name, or the hostname and a random
	// suffix.
	ReplicaID string
	// Namespace is where the Lease lives: the host's namespace. Required.
	Namespace string

	// LeaseDuration is how long the Lease stays live after each renewal: a
	// member that dies drops out of the ring this long after its last
	// renewal. The Lease holds it in whole seconds, rounded up. Defaults to
	// DefaultLeaseDuration (15s).
	LeaseDuration time.Duration
	// RenewInterval is how often the Member renews its Lease, and the
	// deadline of each attempt. Defaults to a third of LeaseDuration (5s).
	RenewInterval time.Duration
	// RenewDeadline is how long after the start of its last successful
	// renewal the Member is still Holding. It must lie between RenewInterval
	// and LeaseDuration, so that a member that cannot renew stops claiming
	// objects before the others drop it from the ring. Defaults to two thirds
	// of LeaseDuration (10s).
	RenewDeadline time.Duration
	// ConfirmRejoin makes a term that follows a lapse (see Term) held only
	// once Confirm is called with its number: the host refreshes its view
	// of the cluster first. Defaults to false: a new term is held at once.
	ConfirmRejoin bool
	// KeepLeaseOnStop leaves the Lease in place when the Member stops, to
	// expire LeaseDuration after its last renewal, as after a crash. Defaults
	// to false: a Member that stops deletes its Lease, and the others
	// rebalance at once.
	KeepLeaseOnStop bool

	// Clock tells the time. Defaults to the real clock.
	Clock clock.WithTicker
}

// Member holds one replica's Lease in a ring: it creates the Lease, renews it
// every RenewInterval (creating it again if someone deleted it), and deletes
// it when it stops. It is a manager.Runnable that runs on every replica,
// leader or not.
//
// Holding reports whether its Lease is current. A replica must claim an
// object (reconcile it, label it as its own) only while Holding is true and
// the ring names it as the object's owner: a replica that cannot renew stops
// being Holding before the others drop it from the ring (RenewDeadline is
// below LeaseDuration), and is not ready (Check), so it must stop
// reconciling, as a leader that loses its lease does, until Holding is true
// again.
type Member struct {
	leases coordinationv1client.LeaseInterface
	opts   MemberOptions
	name   string
	clock  clock.WithTicker
	notes  notifier

	// poke asks the renewal loop to write the Lease now.
	poke chan struct{}

	mu          sync.Mutex
	lease       *coordinationv1.Lease // as last written or read
	lastRenewal time.Time             // the start of the last successful renewal
	// term is the number of the Member's current term, confirmed that of
	// the last term confirmed (see Term and Confirm).
	term, confirmed uint64
	stopped         bool
	holding         bool // as last notified
	// adopted is the value of sharding.AdoptedRingAnnotation each write
	// carries, "" for none; adoptedDone tells that a write carried it.
	adopted        string
	adoptedDone    bool
	adoptedWritten chan struct{} // closed at each successful write
}

var _ manager.LeaderElectionRunnable = &Member{}

// NewMember returns the Member opts describe, writing its Lease through cs (a
// clientset's CoordinationV1(), or the client coordinationv1client.NewForConfig
// makes).
func NewMember(cs coordinationv1client.LeasesGetter, opts MemberOptions) (*Member, error) {
	if err := validateRing(opts.Ring); err != nil {
		return nil, fmt.Errorf("sharding membership: %w", err)
	}
	if opts.ReplicaID == "" {
		return nil, errors.New("sharding membership: no replica ID")
	}
	if opts.Namespace == "" {
		return nil, errors.New("sharding membership: no namespace for the Lease")
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.RenewInterval == 0 {
		opts.RenewInterval = opts.LeaseDuration / 3
	}
	if opts.RenewDeadline == 0 {
		opts.RenewDeadline = opts.LeaseDuration * 2 / 3
	}
	if opts.RenewInterval <= 0 || opts.RenewInterval >= opts.RenewDeadline || opts.RenewDeadline >= opts.LeaseDuration {
		return nil, fmt.Errorf("sharding membership: the renew interval (%s), renew deadline (%s) and lease duration (%s) must be positive and in that order, each longer than the last",
			opts.RenewInterval, opts.RenewDeadline, opts.LeaseDuration)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Member{
		leases: cs.Leases(opts.Namespace),
		opts:   opts,
		name:   LeaseName(opts.Ring, opts.ReplicaID),
		clock:  opts.Clock,
		poke:   make(chan struct{}, 1),

		adoptedWritten: make(chan struct{}),
	}, nil
}

// LeaseName is the name of the Member's Lease.
func (m *Member) LeaseName() string { return m.name }

// NeedLeaderElection is false: every replica is a member.
func (m *Member) NeedLeaderElection() bool { return false }

// Start holds the Lease until ctx ends, then deletes it (unless
// KeepLeaseOnStop) and returns nil. Failures to renew are logged and retried
// at the next interval; Holding says whether they last too long.
func (m *Member) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithValues("ring", m.opts.Ring, "replica", m.opts.ReplicaID,
		"lease", m.opts.Namespace+"/"+m.name)
	ticker := m.clock.NewTicker(m.opts.RenewInterval)
	defer ticker.Stop()
	failing := false
	for {
		if err := m.renew(ctx); err != nil && ctx.Err() == nil {
			if !failing {
				log.Error(err, "renewing the shard Lease failed; retrying", "every", m.opts.RenewInterval)
			}
			failing = true
		} else if err == nil {
			if failing {
				log.Info("renewed the shard Lease again")
			}
			failing = false
		}
		m.notifyHolding()
		select {
		case <-ctx.Done():
			m.stop(log)
			return nil
		case <-ticker.C():
		case <-m.poke:
		}
	}
}

// Publish writes adopted into the Lease's sharding.AdoptedRingAnnotation,
// and every renewal after carries it. It returns once a write that carried
// it has succeeded, or with ctx's error; while the renewals fail, it waits.
// The Member must be running (Start).
func (m *Member) Publish(ctx context.Context, adopted string) error {
	m.mu.Lock()
	m.adopted = adopted
	m.adoptedDone = false
	m.mu.Unlock()
	select {
	case m.poke <- struct{}{}:
	default:
	}
	for {
		m.mu.Lock()
		done := m.adoptedDone && m.adopted == adopted
		written := m.adoptedWritten
		m.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shard Lease %s/%s: publishing the adopted ring %s: %w", m.opts.Namespace, m.name, adopted, ctx.Err())
		case <-written:
		}
	}
}

// renew creates or renews the Lease once.
func (m *Member) renew(ctx context.Context) error {
	start := m.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, m.opts.RenewInterval)
	defer cancel()
	m.mu.Lock()
	current := m.lease
	adopted := m.adopted
	// A renewal that begins once the last term has ended starts a new one,
	// and is a new acquisition of the Lease: its acquireTime changes, and so
	// does the ring's ID (see MemberLease.AcquireTime).
	lapsed := m.lastRenewal.IsZero() || !start.Before(m.lastRenewal.Add(m.opts.RenewDeadline))
	m.mu.Unlock()

	var (
		written *coordinationv1.Lease
		err     error
	)
	if current != nil {
		written, err = m.leases.Update(ctx, m.renewed(current, start, adopted, lapsed), metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			// Changed by someone else: renew what is there now.
			current, err = m.leases.Get(ctx, m.name, metav1.GetOptions{})
			if err == nil {
				written, err = m.leases.Update(ctx, m.renewed(current, start, adopted, lapsed), metav1.UpdateOptions{})
			}
		}
	}
	if current == nil || apierrors.IsNotFound(err) {
		// Never made, or deleted by someone: make it (again).
		written, err = m.leases.Create(ctx, m.renewed(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: m.opts.Namespace},
			Spec:       coordinationv1.LeaseSpec{AcquireTime: &metav1.MicroTime{Time: start}},
		}, start, adopted, lapsed), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Left by an earlier run of this replica: take it over.
			if current, err = m.leases.Get(ctx, m.name, metav1.GetOptions{}); err == nil {
				written, err = m.leases.Update(ctx, m.renewed(current, start, adopted, lapsed), metav1.UpdateOptions{})
			}
		}
	}
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			m.mu.Lock()
			m.lease = nil // read it afresh next time
			m.mu.Unlock()
		}
		return fmt.Errorf("shard Lease %s/%s: %w", m.opts.Namespace, m.name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lease = written
	if lapsed {
		m.term++
		if m.lastRenewal.IsZero() || !m.opts.ConfirmRejoin {
			// The first term's view is the one the manager's caches are
			// about to sync.
			m.confirmed = m.term
		}
	}
	m.lastRenewal = start
	if adopted != "" && adopted == m.adopted {
		m.adoptedDone = true
		close(m.adoptedWritten)
		m.adoptedWritten = make(chan struct{})
	}
	return nil
}

// renewed is lease held by this replica and renewed at now, carrying the
// adopted ring (none when ""); acquired again at now when reacquire is set
// (a new term).
func (m *Member) renewed(lease *coordinationv1.Lease, now time.Time, adopted string, reacquire bool) *coordinationv1.Lease {
	l := lease.DeepCopy()
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[sharding.RingLabel] = m.opts.Ring
	if adopted != "" {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[sharding.AdoptedRingAnnotation] = adopted
	} else {
		delete(l.Annotations, sharding.AdoptedRingAnnotation)
	}
	if reacquire || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != m.opts.ReplicaID {
		l.Spec.HolderIdentity = ptr.To(m.opts.ReplicaID)
		l.Spec.AcquireTime = &metav1.MicroTime{Time: now}
	}
	l.Spec.LeaseDurationSeconds = ptr.To(int32(math.Ceil(m.opts.LeaseDuration.Seconds())))
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	return l
}

// stop gives the Lease up, unless KeepLeaseOnStop: no longer Holding first,
// then the Lease deleted, if it is still the one this Member wrote.
func (m *Member) stop(log logr.Logger) {
	m.mu.Lock()
	m.stopped = true
	lease := m.lease
	m.mu.Unlock()
	m.notifyHolding()
	if m.opts.KeepLeaseOnStop || lease == nil {
		return
	}
	// The manager's context has ended: the deletion gets a deadline of its own.
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.RenewDeadline)
	defer cancel()
	err := m.leases.Delete(ctx, m.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &lease.UID}})
	switch {
	case err == nil:
		log.Info("released the shard Lease")
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Gone already, or someone else's by now.
	default:
		log.Error(err, "releasing the shard Lease failed: the others drop this replica when it expires", "in", m.opts.LeaseDuration)
	}
}

// Holding reports whether the Member holds its Lease: it has renewed it less
// than RenewDeadline ago and is not stopping. Claim objects only while it is
// true.
func (m *Member) Holding() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holdingLocked()
}

func (m *Member) holdingLocked() bool {
	return m.currentLocked() && m.confirmed == m.term
}

// currentLocked reports whether the Lease is current: renewed less than
// RenewDeadline ago, and the Member not stopping.
func (m *Member) currentLocked() bool {
	return !m.stopped && !m.lastRenewal.IsZero() && m.clock.Since(m.lastRenewal) < m.opts.RenewDeadline
}

// Term is the Member's fencing.Fence. A term lasts RenewDeadline from the
// start of the last successful renewal; a renewal that begins after that,
// when the replica may have dropped out of the ring and its objects gone to
// others, starts the next term. With ConfirmRejoin, such a term is held only
// once the host has confirmed it (Confirm), after refreshing its view.
func (m *Member) Term() fencing.Term {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := fencing.Term{Number: m.term, Held: m.holdingLocked(), Lease: "shard Lease " + m.opts.Namespace + "/" + m.name}
	if !m.lastRenewal.IsZero() {
		t.Until = m.lastRenewal.Add(m.opts.RenewDeadline)
	}
	return t
}

// Unconfirmed returns the number of the current term when it is current
// but not yet confirmed: the replica has rejoined, and must refresh its
// view and Confirm the term before it claims any object.
func (m *Member) Unconfirmed() (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.term, m.currentLocked() && m.confirmed != m.term
}

// Confirm makes term held, if it is still the current term: the host has
// refreshed its view since the term began. It reports whether it did.
func (m *Member) Confirm(term uint64) bool {
	m.mu.Lock()
	ok := term == m.term
	if ok {
		m.confirmed = term
	}
	m.mu.Unlock()
	m.notifyHolding()
	return ok
}

// Subscribe returns a channel that receives a value whenever Holding
// changes, as the Member sees at each renewal attempt (so up to RenewInterval
// after RenewDeadline has passed; Holding itself is exact). Changes that come
// faster than the channel is read are folded into one: read Holding after
// each.
func (m *Member) Subscribe() <-chan struct{} { return m.notes.subscribe() }

func (m *Member) notifyHolding() {
	m.mu.Lock()
	now := m.holdingLocked()
	changed := now != m.holding
	m.holding = now
	m.mu.Unlock()
	if changed {
		m.notes.notify()
	}
}

// Check is a healthz.Checker for readiness: it fails while the Member is
// not Holding, naming the Lease.
func (m *Member) Check(_ *http.Request) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holdingLocked() {
		return nil
	}
	switch {
	case m.stopped:
		return fmt.Errorf("replica %s left ring %s (Lease %s/%s)", m.opts.ReplicaID, m.opts.Ring, m.opts.Namespace, m.name)
	case m.currentLocked():
		return fmt.Errorf("replica %s rejoined ring %s after its Lease %s/%s lapsed (term %d): refreshing its view before it reconciles again",
			m.opts.ReplicaID, m.opts.Ring, m.opts.Namespace, m.name, m.term)
	case m.lastRenewal.IsZero():
		return fmt.Errorf("replica %s has not yet made its Lease %s/%s in ring %s", m.opts.ReplicaID, m.opts.Namespace, m.name, m.opts.Ring)
	}
	return fmt.Errorf("replica %s last renewed its Lease %s/%s in ring %s %s ago, longer than the renew deadline %s",
		m.opts.ReplicaID, m.opts.Namespace, m.name, m.opts.Ring, m.clock.Since(m.lastRenewal).Round(time.Millisecond), m.opts.RenewDeadline)
}
