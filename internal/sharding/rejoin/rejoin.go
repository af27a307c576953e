package rejoin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/sharding/ring"
)

// Member is the replica's membership: membership.Member.
type Member interface {
	// Unconfirmed returns the current term when it awaits confirmation.
	Unconfirmed() (uint64, bool)
	// Confirm makes the term held, if it is still the current one.
	Confirm(term uint64) bool
	// Subscribe tells of each change of whether the Member is holding.
	Subscribe() <-chan struct{}
}

// RingSource is the replica's view of the ring: membership.Source.
type RingSource interface {
	// Refresh reads the ring from the Leases on the API server and
	// publishes it.
	Refresh(ctx context.Context) (*ring.Ring, error)
	// Current is the ring last published.
	Current() *ring.Ring
}

// Barrier is the server-side mode's handoff barrier: serverside.Barrier.
type Barrier interface {
	// Adopted returns the ring the replica reconciles by, and whether every
	// other member has adopted it.
	Adopted() (*ring.Ring, bool)
}

// Options configure a Rejoiner.
type Options struct {
	// Member is the replica's membership. Required.
	Member Member
	// Kinds are the kinds whose cache holds the replica's share. Required.
	Kinds []schema.GroupVersionKind
	// Cache is the replica's cache of Kinds. Required.
	Cache client.Reader
	// Live reads Kinds from the API server, not from a cache. Required.
	Live client.Reader
	// Ring and Barrier, in the server-side mode, are the ring source and
	// the handoff barrier the rejoin waits for. Defaults to nil: the label
	// mode, where the sharder on the leader moves objects between replicas.
	Ring    RingSource
	Barrier Barrier
	// Poll is how often the cache and the barrier are looked at while the
	// replica waits for them. Defaults to 20ms: a look costs no request.
	Poll time.Duration
	// Relist is how long the cache may take to catch up with one list
	// before the Rejoiner lists again. Defaults to 30s.
	Relist time.Duration
}

// Rejoiner confirms each term of the replica that follows a lapse, once its
// view is fresh (see the package documentation). It is a manager.Runnable
// that runs on every replica.
type Rejoiner struct {
	opts Options
	subs <-chan struct{}
}

var _ manager.LeaderElectionRunnable = &Rejoiner{}

// New returns the Rejoiner opts describe.
func New(opts Options) (*Rejoiner, error) {
	if opts.Member == nil || opts.Cache == nil || opts.Live == nil || len(opts.Kinds) == 0 {
		return nil, errors.New("sharding rejoin: needs a member, the sharded kinds, the cache and a live reader")
	}
	if (opts.Ring == nil) != (opts.Barrier == nil) {
		return nil, errors.New("sharding rejoin: the server-side mode needs both the ring source and the barrier")
	}
	if opts.Poll <= 0 {
		opts.Poll = 20 * time.Millisecond
	}
	if opts.Relist <= 0 {
		opts.Relist = 30 * time.Second
	}
	// Subscribed now, so that no change before Start is missed.
	return &Rejoiner{opts: opts, subs: opts.Member.Subscribe()}, nil
}

// NeedLeaderElection is false: every replica rejoins its ring.
func (r *Rejoiner) NeedLeaderElection() bool { return false }

// Start confirms each rejoin's term until ctx ends.
func (r *Rejoiner) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("rejoin")
	for {
		if term, ok := r.opts.Member.Unconfirmed(); ok {
			start := time.Now()
			log.Info("the shard Lease lapsed and was renewed: refreshing the view before reconciling again", "term", term)
			err := r.refresh(ctx, term, log)
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, errTermEnded):
				log.Info("the term ended while the view was refreshed; starting over", "term", term)
				continue
			case err != nil:
				return err
			}
			if r.opts.Member.Confirm(term) {
				log.Info("view refreshed: reconciling again", "term", term, "took", time.Since(start).Round(time.Millisecond).String())
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.subs:
		}
	}
}

// errTermEnded: the term being confirmed is no longer the current one.
var errTermEnded = errors.New("the term ended")

// refresh waits until the replica's view is fresh for term.
func (r *Rejoiner) refresh(ctx context.Context, term uint64, log logr.Logger) error {
	if r.opts.Ring != nil {
		if err := r.readopt(ctx, term, log); err != nil {
			return err
		}
	}
	for _, gvk := range r.opts.Kinds {
		if err := r.catchUp(ctx, term, gvk, log); err != nil {
			return err
		}
	}
	return nil
}

// stillUnconfirmed fails with errTermEnded once term is not the one to
// confirm.
func (r *Rejoiner) stillUnconfirmed(term uint64) error {
	if t, ok := r.opts.Member.Unconfirmed(); !ok || t != term {
		return errTermEnded
	}
	return nil
}

// readopt reads the ring from the Leases and waits until the barrier has
// adopted it (or a later one) and every other member has too.
func (r *Rejoiner) readopt(ctx context.Context, term uint64, log logr.Logger) error {
	var fresh *ring.Ring
	err := wait.PollUntilContextCancel(ctx, r.opts.Poll, true, func(ctx context.Context) (bool, error) {
		if err := r.stillUnconfirmed(term); err != nil {
			return false, err
		}
		var err error
		if fresh, err = r.opts.Ring.Refresh(ctx); err != nil {
			log.Error(err, "reading the ring's Leases to rejoin it; retrying")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	log.V(1).Info("read the ring again", "ring", fresh.ID(), "members", fresh.Members())
	return wait.PollUntilContextCancel(ctx, r.opts.Poll, true, func(context.Context) (bool, error) {
		if err := r.stillUnconfirmed(term); err != nil {
			return false, err
		}
		adopted, cleared := r.opts.Barrier.Adopted()
		// The ring published since the refresh, if it changed again.
		current := r.opts.Ring.Current()
		return cleared && adopted != nil && adopted.ID() == current.ID(), nil
	})
}

// catchUp waits until the cache of gvk holds no object older than a list
// from the API server made now shows it, and none the list no longer has.
// Objects the list has and the cache does not are no concern: the cache
// never makes the replica act on an object it does not hold.
func (r *Rejoiner) catchUp(ctx context.Context, term uint64, gvk schema.GroupVersionKind, log logr.Logger) error {
	for {
		live, err := r.listLive(ctx, gvk)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Error(err, "listing to check the cache; retrying", "kind", gvk.String())
			if err := sleep(ctx, r.opts.Poll*10); err != nil {
				return err
			}
			continue
		}
		var behind string
		err = wait.PollUntilContextTimeout(ctx, r.opts.Poll, r.opts.Relist, true, func(ctx context.Context) (bool, error) {
			if err := r.stillUnconfirmed(term); err != nil {
				return false, err
			}
			behind, err = r.behind(ctx, gvk, live)
			return behind == "" && err == nil, err
		})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errTermEnded), ctx.Err() != nil:
			return err
		case wait.Interrupted(err):
			log.Info("the cache has not caught up with the list yet; listing again", "kind", gvk.String(), "behind", behind, "after", r.opts.Relist.String())
		default:
			return err
		}
	}
}

// listed is what a list from the API server showed of a kind: its objects'
// metadata by namespace and name, and each listed namespace's list version
// ("" is the cluster-scoped list's).
type listed struct {
	objects  map[types.NamespacedName]metav1.PartialObjectMetadata
	versions map[string]string
}

// listLive lists gvk's objects in the namespaces the cache holds any in
// (everywhere for a kind the cache holds cluster-scoped), as their metadata,
// from the API server.
func (r *Rejoiner) listLive(ctx context.Context, gvk schema.GroupVersionKind) (listed, error) {
	out := listed{objects: map[types.NamespacedName]metav1.PartialObjectMetadata{}, versions: map[string]string{}}
	cached, err := r.cached(ctx, gvk)
	if err != nil {
		return out, err
	}
	namespaces := map[string]bool{}
	for _, o := range cached {
		namespaces[o.GetNamespace()] = true
	}
	for ns := range namespaces {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		var opts []client.ListOption
		if ns != "" {
			opts = append(opts, client.InNamespace(ns))
		}
		if err := r.opts.Live.List(ctx, list, opts...); err != nil {
			return out, fmt.Errorf("listing %s from the API server: %w", gvk.String(), err)
		}
		out.versions[ns] = list.ResourceVersion
		for _, item := range list.Items {
			out.objects[types.NamespacedName{Namespace: item.Namespace, Name: item.Name}] = item
		}
	}
	return out, nil
}

// cached lists gvk's objects in the cache.
func (r *Rejoiner) cached(ctx context.Context, gvk schema.GroupVersionKind) ([]object.Object, error) {
	list := object.NewList(gvk)
	if err := r.opts.Cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing %s from the cache: %w", gvk.String(), err)
	}
	return list.Items, nil
}

// behind names an object the cache holds in a version older than live
// shows, or that live no longer has (deleted, or out of the replica's
// share) and that has not changed since; "" when there is none. An object of
// a namespace live did not list came into the cache after the list: it is
// as fresh as the watch.
func (r *Rejoiner) behind(ctx context.Context, gvk schema.GroupVersionKind, live listed) (string, error) {
	cached, err := r.cached(ctx, gvk)
	if err != nil {
		return "", err
	}
	for i := range cached {
		o := &cached[i]
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		listVersion, listedNamespace := live.versions[o.GetNamespace()]
		if !listedNamespace {
			continue
		}
		l, ok := live.objects[key]
		if ok && l.UID == o.GetUID() {
			if !atLeast(o.GetResourceVersion(), l.ResourceVersion) {
				return fmt.Sprintf("%s %s (cached at %s, listed at %s)", gvk.Kind, key, o.GetResourceVersion(), l.ResourceVersion), nil
			}
			continue
		}
		// Not listed as cached: it must have been written since the list.
		if !atLeast(o.GetResourceVersion(), listVersion) {
			return fmt.Sprintf("%s %s (cached at %s, gone from the list at %s)", gvk.Kind, key, o.GetResourceVersion(), listVersion), nil
		}
	}
	return "", nil
}

// atLeast reports whether resource version a is b or newer. Versions that
// do not compare (an API server whose versions are not the integers etcd
// gives) are at least one another only when equal.
func atLeast(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		return a == b
	}
	return cmp >= 0
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
