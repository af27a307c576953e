package membership

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/polyop/polyop/internal/sharding"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	coordinationv1listers "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/polyop/polyop/internal/sharding/ring"
)

// SourceOptions configure a Source.
type SourceOptions struct {
	// Ring is the ring's name: the sidecar's name. Required.
	Ring string
	// Namespace is where the ring's Leases live: the host's namespace.
	// Required.
	Namespace string
	// ReplicaID is this replica's member name, for the
	// polyop_shard_hash_space_share metric. Defaults to none: the metric is
	// left alone.
	ReplicaID string
	// VirtualNodes is the number of points each member places on the ring.
	// Every replica of a ring must use the same. Defaults to
	// ring.DefaultVirtualNodes (100).
	VirtualNodes int
	// Clock tells the time. Defaults to the real clock.
	Clock clock.WithTicker
}

// Source watches a ring's Leases and publishes the ring of their live
// holders. It is a manager.Runnable that runs on every replica, leader or
// not, with an informer of its own on the Leases labelled sharding.RingLabel=<ring>
// in one namespace.
//
// Current returns the ring; Subscribe tells when it changed. The ring is
// computed again on every event of the ring's Leases and, without any event,
// when the first live Lease expires, so a member that died drops out on time.
// Replicas that see the same live Leases compute the same ring.
type Source struct {
	cs    coordinationv1client.LeasesGetter
	opts  SourceOptions
	clock clock.WithTicker
	notes notifier
	// leaseNotes tells of every event of the ring's Leases.
	leaseNotes notifier

	mu      sync.Mutex
	current *ring.Ring
	leases  []MemberLease
}

var _ manager.LeaderElectionRunnable = &Source{}

// NewSource returns the Source opts describe, reading Leases through cs (a
// clientset's CoordinationV1(), or the client coordinationv1client.NewForConfig
// makes). When cs has an IsWatchListSemanticsUnSupported method that returns
// true, as a fake clientset has, the informer lists and then watches rather
// than asking for a watch list.
func NewSource(cs coordinationv1client.LeasesGetter, opts SourceOptions) (*Source, error) {
	if err := validateRing(opts.Ring); err != nil {
		return nil, fmt.Errorf("sharding membership: %w", err)
	}
	if opts.Namespace == "" {
		return nil, errors.New("sharding membership: no namespace for the Leases")
	}
	if opts.VirtualNodes < 1 {
		opts.VirtualNodes = ring.DefaultVirtualNodes
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Source{cs: cs, opts: opts, clock: opts.Clock}, nil
}

// NeedLeaderElection is false: every replica computes the ring.
func (s *Source) NeedLeaderElection() bool { return false }

// Selector selects a ring's Leases.
func Selector(ringName string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{sharding.RingLabel: ringName})
}

// Start watches the Leases and publishes the ring until ctx ends. The first
// ring is published once the informer has listed the Leases.
func (s *Source) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithValues("ring", s.opts.Ring, "namespace", s.opts.Namespace)
	informer := s.informer()
	lister := coordinationv1listers.NewLeaseLister(informer.GetIndexer())

	// One pending wake-up is enough: each recomputes from the lister.
	changed := make(chan struct{}, 1)
	wake := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    wake,
		UpdateFunc: func(_, obj any) { wake(obj) },
		DeleteFunc: wake,
	}); err != nil {
		return fmt.Errorf("sharding membership: watching the Leases of ring %s: %w", s.opts.Ring, err)
	}
	// The informer stops with ctx, before Start returns.
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()
	running.Go(func() { informer.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil // ctx ended
	}

	for {
		list, err := lister.Leases(s.opts.Namespace).List(Selector(s.opts.Ring))
		if err != nil {
			return fmt.Errorf("sharding membership: listing the Leases of ring %s: %w", s.opts.Ring, err)
		}
		items := make([]coordinationv1.Lease, len(list))
		for i, l := range list {
			items[i] = *l
		}
		next := s.update(Leases(items), log)
		s.leaseNotes.notify()

		var expiry <-chan time.Time
		var timer clock.Timer
		if !next.IsZero() {
			wait := next.Sub(s.clock.Now())
			if wait <= 0 {
				continue // expired while the ring was computed
			}
			timer = s.clock.NewTimer(wait)
			expiry = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-expiry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// informer is an informer of the ring's Leases, as client-go's informer
// factory makes one for a namespace and a label selector: the Source's own,
// without the factory, whose every kind's informer would link client-go's
// whole clientset into the binary.
func (s *Source) informer() cache.SharedIndexInformer {
	leases := s.cs.Leases(s.opts.Namespace)
	selector := Selector(s.opts.Ring).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return leases.Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, s.cs), &coordinationv1.Lease{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
}

// update publishes the ring of the live leases, when it differs from the
// current one, and returns when the first live Lease expires.
func (s *Source) update(leases []MemberLease, log logr.Logger) time.Time {
	now := s.clock.Now()
	members, next := LiveMembers(leases, now)
	r := ring.New(members, s.opts.VirtualNodes).Incarnated(Incarnations(leases, now))
	s.mu.Lock()
	s.leases = leases
	first := s.current == nil
	if !first && r.ID() == s.current.ID() {
		s.mu.Unlock()
		return next
	}
	s.current = r
	s.mu.Unlock()

	membersGauge.WithLabelValues(s.opts.Ring).Set(float64(r.Len()))
	if !first {
		ringChanges.WithLabelValues(s.opts.Ring).Inc()
	}
	if s.opts.ReplicaID != "" {
		shareGauge.WithLabelValues(s.opts.Ring).Set(Share(r, s.opts.ReplicaID))
	}
	log.Info("shard ring", "members", members, "ring", r.ID())
	s.notes.notify()
	return next
}

// Current returns the ring of the live members, or nil until the Source has
// listed the ring's Leases once. The ring returned never changes; a new one
// replaces it.
func (s *Source) Current() *ring.Ring {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// Leases returns the ring's Leases as the Source last read them, live or not.
func (s *Source) Leases() []MemberLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.leases)
}

// Subscribe returns a channel that receives a value whenever Current
// changes, the first ring included. Changes that come faster than the
// channel is read are folded into one: read Current after each. The channel
// is never closed.
func (s *Source) Subscribe() <-chan struct{} { return s.notes.subscribe() }

// SubscribeLeases returns a channel that receives a value after each event
// of the ring's Leases the Source has seen (a renewal, an annotation
// written), folded as Subscribe's are. The channel is never closed.
func (s *Source) SubscribeLeases() <-chan struct{} { return s.leaseNotes.subscribe() }

// ReadLeases reads the ring's Leases from the API server, not from the
// Source's informer: a consistent read, which sees every write that ended
// before it began.
func (s *Source) ReadLeases(ctx context.Context) ([]MemberLease, error) {
	list, err := s.cs.Leases(s.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: Selector(s.opts.Ring).String()})
	if err != nil {
		return nil, fmt.Errorf("sharding membership: reading the Leases of ring %s in namespace %s: %w", s.opts.Ring, s.opts.Namespace, err)
	}
	return Leases(list.Items), nil
}

// Refresh reads the ring's Leases from the API server and publishes the
// ring they make, as an event of the informer would: a replica that was
// paused, whose informer may still be catching up, sees the ring as it is
// now. It returns the ring.
func (s *Source) Refresh(ctx context.Context) (*ring.Ring, error) {
	leases, err := s.ReadLeases(ctx)
	if err != nil {
		return nil, err
	}
	s.update(leases, logf.FromContext(ctx).WithValues("ring", s.opts.Ring, "namespace", s.opts.Namespace))
	s.leaseNotes.notify()
	return s.Current(), nil
}

// Check is a healthz.Checker for readiness: it fails until the first ring is
// published.
func (s *Source) Check(_ *http.Request) error {
	if s.Current() == nil {
		return fmt.Errorf("the Leases of ring %s in namespace %s are not listed yet", s.opts.Ring, s.opts.Namespace)
	}
	return nil
}
