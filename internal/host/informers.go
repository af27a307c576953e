package host

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/object"
)

// startInformers makes the cache run the informer of each of kinds on every
// replica, and reports when they have synced: it logs it, and is the readiness
// check "informers" until then.
//
// A controller's own sources start on the leader only, after it wins the
// election, so a follower would start the informers of the kinds a controller
// reconciles or watches only then, listing every object before the first
// reconcile. The cache runs on every replica, and an informer requested before
// the manager starts runs with it: a new leader finds its informers synced and
// reconciles at once. The objects are cached in the same form the
// controllers' sources ask for (object.Object), so they share the informers.
func startInformers(mgr ctrl.Manager, kinds []schema.GroupVersionKind) (*informersSynced, error) {
	for _, gvk := range kinds {
		// Before the manager starts, this only registers the informer.
		if _, err := mgr.GetCache().GetInformer(context.Background(), object.New(gvk)); err != nil {
			return nil, fmt.Errorf("starting the informer of %s: %w", description.GVKString(gvk), err)
		}
	}
	names := make([]string, len(kinds))
	for i, gvk := range kinds {
		names[i] = description.GVKString(gvk)
	}
	s := &informersSynced{cache: mgr.GetCache(), kinds: names, log: ctrl.Log.WithName("host"), since: time.Now()}
	if err := mgr.Add(s); err != nil {
		return nil, err
	}
	return s, nil
}

// informersSynced waits, on every replica, for the cache's informers to sync.
type informersSynced struct {
	cache cache.Cache
	kinds []string
	log   logr.Logger
	// since is when the informers were requested, shortly before the
	// manager starts them.
	since  time.Time
	synced atomic.Bool
}

// NeedLeaderElection is false: followers keep their informers too.
func (s *informersSynced) NeedLeaderElection() bool { return false }

// Start waits for the informers to sync and logs it.
func (s *informersSynced) Start(ctx context.Context) error {
	if !s.cache.WaitForCacheSync(ctx) {
		return nil // stopped first
	}
	s.synced.Store(true)
	s.log.Info("informers synced", "kinds", s.kinds, "took", time.Since(s.since).Round(time.Millisecond).String())
	return nil
}

// Check is the readiness check "informers": it fails until they have synced.
func (s *informersSynced) Check(_ *http.Request) error {
	if !s.synced.Load() {
		return fmt.Errorf("the informers of %s have not synced yet", strings.Join(s.kinds, ", "))
	}
	return nil
}
