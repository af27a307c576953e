package cluster

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// DefaultBarrierTimeout is how long CacheProgress.Versions waits, by
// default, for the Watch streams of one kind to catch up with the changes
// the controllers have seen.
const DefaultBarrierTimeout = 5 * time.Second

// CacheProgress gives a sidecar that keeps its own copy of a kind through
// Watch "read your trigger" consistency, as a controller-runtime manager's
// informer cache gives its reconcilers: the host's controllers tell it of
// every event they handle (Seen), and, before each call to the sidecar,
// Versions makes every open Watch stream of each kind a sidecar has watched
// deliver a message at or after the newest version the controllers have
// seen of that kind, and names that version, for the call's cache_versions.
// A kind counts from its first Watch on, streams open or not, so that a
// stream that resumes after an interruption, or a new one, is waited for
// too.
//
// The controllers and the Watch streams listen to the same shared informer,
// each with a handler of its own, so an event a controller has handled
// reaches the streams too, but maybe later: Versions waits for it.
//
// A CacheProgress is safe for concurrent use. Its zero value is not: use
// NewCacheProgress.
type CacheProgress struct {
	// Timeout bounds the wait for one kind; then the call goes on without
	// it, logged at V(1) naming the kind. Defaults to DefaultBarrierTimeout.
	Timeout time.Duration
	// Log receives a line for each kind the streams did not catch up with
	// in time. Defaults to a logger that discards.
	Log logr.Logger

	// seen maps a kind to the *atomic.Uint64 of the highest resource
	// version a controller has seen of it.
	seen   sync.Map
	server atomic.Pointer[Server]
}

// NewCacheProgress returns a CacheProgress that no Server serves yet: its
// Versions is empty until one is built with it in Options.Progress.
func NewCacheProgress() *CacheProgress {
	return &CacheProgress{Timeout: DefaultBarrierTimeout, Log: logr.Discard()}
}

// Seen records that a controller handled an event of obj, of kind gvk.
func (p *CacheProgress) Seen(gvk schema.GroupVersionKind, obj client.Object) {
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil || rv == 0 {
		return
	}
	v, ok := p.seen.Load(gvk)
	if !ok {
		v, _ = p.seen.LoadOrStore(gvk, new(atomic.Uint64))
	}
	newest := v.(*atomic.Uint64)
	for {
		cur := newest.Load()
		if cur >= rv || newest.CompareAndSwap(cur, rv) {
			return
		}
	}
}

// seenVersion is the highest resource version a controller has seen of
// gvk, 0 for none.
func (p *CacheProgress) seenVersion(gvk schema.GroupVersionKind) uint64 {
	if v, ok := p.seen.Load(gvk); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

// Versions returns, for each kind a sidecar has watched, the version its
// streams will all have delivered a message at or after, once every change
// a controller has seen of the kind reached them, waiting for that (at most
// Timeout per kind, and bounded by ctx). Before the first Watch it returns
// nil at once.
func (p *CacheProgress) Versions(ctx context.Context) []*polyopv1alpha1.CacheVersion {
	s := p.server.Load()
	if s == nil {
		return nil
	}
	hubs := s.hubList.Load()
	if hubs == nil {
		return nil
	}
	versions := make([]*polyopv1alpha1.CacheVersion, 0, len(*hubs))
	for _, h := range *hubs {
		want := p.seenVersion(h.gvk)
		wctx, cancel := context.WithTimeout(ctx, p.Timeout)
		v, ok := h.barrier(wctx, want)
		cancel()
		if !ok {
			p.Log.V(1).Info("the Watch streams of a kind did not catch up with the changes the controllers saw in time; calling the sidecar without waiting longer",
				"kind", h.gvk.String(), "seen", want, "delivered", v, "timeout", p.Timeout.String())
		}
		versions = append(versions, &polyopv1alpha1.CacheVersion{
			Kind: &polyopv1alpha1.GroupVersionKind{Group: h.gvk.Group, Version: h.gvk.Version, Kind: h.gvk.Kind},
			// What was delivered: a sidecar waits for no more than the
			// streams will bring.
			ResourceVersion: strconv.FormatUint(v, 10),
		})
	}
	return versions
}
