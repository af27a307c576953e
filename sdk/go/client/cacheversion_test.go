package client_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/internal/cacheversions"
)

// atVersion is ctx carrying the cache version rv for ConfigMaps, as the
// sidecar server puts a call's ReconcileRequest.cache_versions there.
func atVersion(ctx context.Context, rv int) context.Context {
	return cacheversions.With(ctx, []*polyopv1alpha1.CacheVersion{{
		Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, ResourceVersion: strconv.Itoa(rv)}})
}

// bookmark streams a BOOKMARK at the server's current version.
func (w *watchServer) bookmark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rv++
	for ch := range w.streams {
		ch <- &polyopv1alpha1.WatchResponse{Type: polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_BOOKMARK, ResourceVersion: strconv.Itoa(w.rv)}
	}
	return w.rv
}

func TestAListByALocalIndexReadsAtOrAfterTheVersionItsCallNames(t *testing.T) {
	w, c := newWatchServer(t, ownedConfigMap("a", "x"))
	indexByOwner(t, c)
	eventuallyListed(t, c, "x", "a")

	// The call names version 2, which the copy's Watch has not delivered
	// yet: the List waits for it, and then selects the object it brings.
	type listed struct {
		names []string
		err   error
	}
	done := make(chan listed, 1)
	go func() {
		names, err := listOwnedBy(atVersion(context.Background(), 2), c, "x")
		done <- listed{names, err}
	}()
	select {
	case got := <-done:
		t.Fatalf("the List returned %q (error %v) before its copy had delivered version 2", got.names, got.err)
	case <-time.After(200 * time.Millisecond):
	}
	w.set(ownedConfigMap("b", "x"))
	select {
	case got := <-done:
		if got.err != nil || !slices.Equal(got.names, []string{"a", "b"}) {
			t.Fatalf("the List selected %q with error %v, want a and b", got.names, got.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the List still waits a minute after its copy delivered version 2")
	}

	// A BOOKMARK brings the copy to a version too.
	rv := w.bookmark()
	ctx, cancel := context.WithTimeout(atVersion(context.Background(), rv), time.Minute)
	defer cancel()
	if names, err := listOwnedBy(ctx, c, "x"); err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("after a BOOKMARK at the version the call names, the List selected %q with error %v, want a and b", names, err)
	}
}

func TestAListByALocalIndexFailsClearlyWhenItsCopyNeverReachesTheVersion(t *testing.T) {
	w, c := newWatchServer(t, ownedConfigMap("a", "x"))
	indexByOwner(t, c)
	eventuallyListed(t, c, "x", "a")
	w.mu.Lock()
	delivered := w.rv
	w.mu.Unlock()

	ctx, cancel := context.WithTimeout(atVersion(context.Background(), 99), 300*time.Millisecond)
	defer cancel()
	_, err := listOwnedBy(ctx, c, "x")
	if err == nil {
		t.Fatal("a List at a version its copy never reaches succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the error does not wrap the context's: %v", err)
	}
	for _, says := range []string{`v1 ConfigMap in ns by the index "owner"`, "every ConfigMap in ns",
		"at or after resource version 99", "delivered up to " + strconv.Itoa(delivered)} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("the List's error does not say %q: %v", says, err)
		}
	}
}
