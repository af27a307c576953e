package controller

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	polyopv1alpha1 "github.com/polyop/polyop/gen/go/polyop/v1alpha1"
	"github.com/polyop/polyop/internal/sidecar"
)

// Options configure the controllers Setup builds.
type Options struct {
	// SidecarDownMaxBackoff caps the backoff of every key while the sidecar is
	// unreachable, so that pending work converges at most this long after the
	// sidecar comes back. Zero keeps controller-runtime's uncapped exponential
	// backoff. Defaults to zero.
	SidecarDownMaxBackoff time.Duration
}

// Setup builds one controller per controller in desc and registers it with
// mgr. Every kind must already be resolvable through mgr's RESTMapper.
func Setup(mgr ctrl.Manager, sc Sidecar, desc *sidecar.Description, opts Options) error {
	state := &sidecarState{}
	for _, c := range desc.Controllers {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(c.GVK)
		limiter := newRateLimiter(state, opts.SidecarDownMaxBackoff)
		r := &Reconciler{
			Controller: c,
			Client:     mgr.GetClient(),
			Sidecar:    sc,
			Recorder:   mgr.GetEventRecorder(c.Name),
			limiter:    limiter,
			state:      state,
			kind:       &polyopv1alpha1.GroupVersionKind{Group: c.GVK.Group, Version: c.GVK.Version, Kind: c.GVK.Kind},
		}
		err := ctrl.NewControllerManagedBy(mgr).
			Named(c.Name).
			For(obj, builder.WithPredicates(updateFilterPredicates(c.UpdateFilters)...)).
			WithOptions(controller.Options{
				MaxConcurrentReconciles: c.MaxConcurrentReconciles,
				RateLimiter:             limiter,
			}).
			Complete(r)
		if err != nil {
			return fmt.Errorf("building controller %q for %s: %w", c.Name, c.GVK, err)
		}
	}
	return nil
}
