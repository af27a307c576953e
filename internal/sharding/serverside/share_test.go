package serverside

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/polyop/polyop/internal/sharding/ring"
	"github.com/polyop/polyop/internal/sharding/sharder"
)

// recordingLW records the options of each list and watch, and hands out
// fake watches.
type recordingLW struct {
	lists, watches []metav1.ListOptions
	last           *watch.FakeWatcher
}

func (r *recordingLW) List(o metav1.ListOptions) (runtime.Object, error) {
	r.lists = append(r.lists, o)
	return &metav1.List{}, nil
}

func (r *recordingLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	r.watches = append(r.watches, o)
	r.last = watch.NewFake()
	return r.last, nil
}

var _ toolscache.ListerWatcher = &recordingLW{}

func nextEvent(t *testing.T, w watch.Interface) (watch.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(30 * time.Second):
		t.Fatal("no event from the watch")
		return watch.Event{}, false
	}
}

// A list and the watches after it select the share of the ring at the
// list; when the ring changes the share, the open watch ends with Expired,
// and a watch resumed without listing again ends at once, so that the
// reflector lists the new share.
func TestTheShareListsAndWatchesItsRangesAndEndsTheWatchWhenTheyChange(t *testing.T) {
	src := sharder.NewStaticSource(ring.New([]string{"a", "b"}, 0))
	inner := &recordingLW{}
	lw := NewShare(src, "a").ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	ctx := context.Background()
	two := ring.New([]string{"a", "b"}, 0).ShardSelector("a")

	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	if inner.lists[0].ShardSelector != two || inner.watches[0].ShardSelector != two {
		t.Fatalf("listed with %q and watched with %q, want a's share of a and b, %q", inner.lists[0].ShardSelector, inner.watches[0].ShardSelector, two)
	}
	inner.last.Add(&metav1.PartialObjectMetadata{})
	if ev, _ := nextEvent(t, w); ev.Type != watch.Added {
		t.Fatalf("the watch passed on %v, want the Added event", ev.Type)
	}

	src.Set(ring.New([]string{"a", "b", "c"}, 0))
	ev, _ := nextEvent(t, w)
	if ev.Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) {
		t.Fatalf("after the ring changed the watch sent %v %v, want an Expired error", ev.Type, ev.Object)
	}
	if _, ok := nextEvent(t, w); ok {
		t.Fatal("the watch goes on after its Expired error")
	}
	if !inner.last.IsStopped() {
		t.Error("the API server's watch was not stopped")
	}

	resumed, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "11"})
	if err != nil {
		t.Fatal(err)
	}
	if ev, _ := nextEvent(t, resumed); ev.Type != watch.Error || len(inner.watches) != 1 {
		t.Fatalf("a watch resumed with a stale share sent %v and reached the API server %d times, want an Expired error at once", ev.Type, len(inner.watches)-1)
	}

	// A watch list (client-go's streamed list) fills the store anew.
	three := ring.New([]string{"a", "b", "c"}, 0).ShardSelector("a")
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	if got := inner.watches[1].ShardSelector; got != three {
		t.Errorf("the watch list selected %q, want a's share of a, b and c, %q", got, three)
	}

	// The pages of one list keep its first page's selector.
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	src.Set(ring.New([]string{"a"}, 0))
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{Continue: "page-2"}); err != nil {
		t.Fatal(err)
	}
	if got := inner.lists[2].ShardSelector; got != three {
		t.Errorf("the second page selected %q, want the first page's %q", got, three)
	}
}

// A replica that is no member of the ring lists nothing.
func TestANonMemberListsNothing(t *testing.T) {
	inner := &recordingLW{}
	lw := NewShare(sharder.NewStaticSource(ring.New([]string{"b"}, 0)), "a").ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := inner.lists[0].ShardSelector; got != nothing {
		t.Errorf("a non-member lists with %q, want %q", got, nothing)
	}
}
