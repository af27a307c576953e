package serverside

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/polyop/polyop/internal/sharding/sharder"
)

// nothing is the shard selector of a replica that owns nothing (it is not a
// live member yet, or no longer): the single hash 0, which no UID is
// expected to have (one in 2^64), so the replica lists nothing.
const nothing = "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')"

// Share is a replica's share of the hash space, as the ring of live members
// gives it: the shard selector of its lists and watches.
type Share struct {
	ring   sharder.RingSource
	member string
}

// NewShare returns member's share of the rings src publishes.
func NewShare(src sharder.RingSource, member string) *Share {
	return &Share{ring: src, member: member}
}

// Selector is the shard selector of the replica's current ranges; one that
// selects nothing when the ring gives it none.
func (s *Share) Selector() string {
	if sel := s.ring.Current().ShardSelector(s.member); sel != "" {
		return sel
	}
	return nothing
}

// NewInformer returns a cache.Options.NewInformer for controller-runtime's
// cache: the informers of the objects sharded reports true for (the object
// the informer was asked for: its GVK, or its Go type) list and watch the
// replica's share (ListerWatcher); the others are client-go's own.
func (s *Share) NewInformer(sharded func(runtime.Object) bool) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if sharded(obj) {
			lw = s.ListerWatcher(lw)
		}
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
}

// ListerWatcher wraps lw so that its lists and watches select the replica's
// share. The selector is the share at the time of the list (or of the watch
// that streams the initial objects: client-go's watch list), and each watch
// continues only while the share stays the one its store was filled with:
// when the ring changes it, the watch ends with an Expired error, and the
// reflector lists again, with the new selector, replacing its store.
func (s *Share) ListerWatcher(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	return &shareListWatch{share: s, inner: toolscache.ToListerWatcherWithContext(lw)}
}

type shareListWatch struct {
	share *Share
	inner toolscache.ListerWatcherWithContext

	mu sync.Mutex
	// listed is the selector the reflector's store was last filled with.
	listed string
}

var (
	_ toolscache.ListerWatcher            = &shareListWatch{}
	_ toolscache.ListerWatcherWithContext = &shareListWatch{}
)

func (l *shareListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *shareListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// ListWithContext lists the share; the pages after the first keep the
// first's selector.
func (l *shareListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	if opts.Continue == "" {
		l.listed = l.share.Selector()
	}
	opts.ShardSelector = l.listed
	l.mu.Unlock()
	return l.inner.ListWithContext(ctx, opts)
}

// WatchWithContext watches the share until it changes. A watch that
// resumes from a resource version with another selector than the store's
// ends at once with Expired: the store must be listed again first.
func (l *shareListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	changed := l.share.ring.Changes()
	sel := l.share.Selector()
	l.mu.Lock()
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		l.listed = sel
	}
	stale := sel != l.listed
	l.mu.Unlock()
	if stale {
		return expired(), nil
	}
	opts.ShardSelector = sel
	w, err := l.inner.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	return newShareWatch(w, l.share, sel, changed), nil
}

// expiredEvent ends a watch so that the reflector lists again.
func expiredEvent() watch.Event {
	status := apierrors.NewResourceExpired("the replica's share of the ring changed: listing it again").ErrStatus
	return watch.Event{Type: watch.Error, Object: &status}
}

// expired is a watch that ends at once with expiredEvent.
func expired() watch.Interface {
	ch := make(chan watch.Event, 1)
	ch <- expiredEvent()
	close(ch)
	return watch.NewProxyWatcher(ch)
}

// shareWatch passes the events of a watch of selector on, until the share
// changes: then it stops the watch and ends with expiredEvent.
type shareWatch struct {
	inner    watch.Interface
	result   chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func newShareWatch(inner watch.Interface, share *Share, selector string, changed <-chan struct{}) *shareWatch {
	w := &shareWatch{inner: inner, result: make(chan watch.Event), stop: make(chan struct{})}
	go w.run(share, selector, changed)
	return w
}

func (w *shareWatch) run(share *Share, selector string, changed <-chan struct{}) {
	defer close(w.result)
	defer w.inner.Stop()
	in := w.inner.ResultChan()
	for {
		select {
		case <-w.stop:
			return
		case ev, ok := <-in:
			if !ok {
				return
			}
			select {
			case w.result <- ev:
			case <-w.stop:
				return
			}
		case <-changed:
			changed = share.ring.Changes()
			if share.Selector() == selector {
				continue
			}
			select {
			case w.result <- expiredEvent():
			case <-w.stop:
			}
			return
		}
	}
}

// Stop implements watch.Interface.
func (w *shareWatch) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// ResultChan implements watch.Interface.
func (w *shareWatch) ResultChan() <-chan watch.Event { return w.result }

// ErrNotServed is returned by CheckServed when the API server ignores the
// shard selector.
var ErrNotServed = errors.New("the API server does not serve sharded list and watch (its feature gate ShardedListAndWatch is off)")

// invalidSelector is a shard selector the API server must refuse when it
// serves sharded list and watch: its bounds are not hexadecimal.
const invalidSelector = "shardRange(object.metadata.uid, '0xnothex', '0x1')"

// CheckServed tells whether the API server serves sharded list and watch,
// through list, a list of the sharded kind (with Limit 1): it lists with an
// invalid shard selector, which a server that serves them refuses (a
// Kubernetes 1.37 API server with the error "invalid shard selector: …"; a
// later one may answer 400 Bad Request), while one without the feature ignores the field
// and answers, whether objects exist or not. It returns nil when served,
// ErrNotServed when not, and the list's error when that says nothing about
// the feature (forbidden, not found…).
func CheckServed(ctx context.Context, list func(context.Context, metav1.ListOptions) error) error {
	err := list(ctx, metav1.ListOptions{Limit: 1, ShardSelector: invalidSelector})
	switch {
	case err == nil:
		return ErrNotServed
	case apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) || strings.Contains(err.Error(), "shard selector"):
		return nil
	default:
		return err
	}
}
