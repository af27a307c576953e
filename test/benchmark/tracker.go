package benchmark

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	benchv1alpha1 "github.com/polyop/polyop/test/benchmark/api/v1alpha1"
	"github.com/polyop/polyop/test/benchmark/widget"
)

// readyTracker watches the Widgets of a namespace and notes the moment all n
// of them are ready. One watch costs the API server far less than polling a
// list of thousands of objects.
type readyTracker struct {
	n    int
	done chan struct{}

	mu     sync.Mutex
	ready  map[string]bool
	doneAt time.Time
	err    error
}

// trackReady starts watching; the watch stops with ctx.
func trackReady(ctx context.Context, c client.WithWatch, namespace string, n int) *readyTracker {
	t := &readyTracker{n: n, done: make(chan struct{}), ready: map[string]bool{}}
	go t.loop(ctx, c, namespace)
	return t
}

// loop lists, then watches from the list's resourceVersion, and starts over
// whenever the watch ends, until ctx is done or every object is ready.
func (t *readyTracker) loop(ctx context.Context, c client.WithWatch, namespace string) {
	for ctx.Err() == nil {
		list := &benchv1alpha1.WidgetList{}
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			t.fail(err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for i := range list.Items {
			if t.observe(&list.Items[i], false) {
				return
			}
		}
		w, err := c.Watch(ctx, &benchv1alpha1.WidgetList{}, client.InNamespace(namespace),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true}})
		if err != nil {
			t.fail(err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if t.consume(ctx, w) {
			return
		}
	}
}

// consume handles the events of one watch; it reports whether every object
// is ready.
func (t *readyTracker) consume(ctx context.Context, w watch.Interface) bool {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false
			}
			obj, isWidget := ev.Object.(*benchv1alpha1.Widget)
			if !isWidget {
				continue // a bookmark or an error: the next watch starts over
			}
			if t.observe(obj, ev.Type == watch.Deleted) {
				return true
			}
		}
	}
}

// observe records one Widget's state; it reports whether every object is now
// ready, closing done the first time.
func (t *readyTracker) observe(w *benchv1alpha1.Widget, deleted bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.doneAt.IsZero() {
		return true
	}
	if !deleted && widget.IsReady(w) {
		t.ready[w.Name] = true
	} else {
		delete(t.ready, w.Name)
	}
	if len(t.ready) >= t.n {
		t.doneAt = time.Now()
		close(t.done)
		return true
	}
	return false
}

func (t *readyTracker) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.err = err
}

// state returns how many objects are ready, when all were (zero until
// then), and the last error the watch met.
func (t *readyTracker) state() (ready int, doneAt time.Time, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ready), t.doneAt, t.err
}
