package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/polyop/polyop/examples/go/memcached/api/v1"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// SetupWithManager runs the reconciler in a controller-runtime manager, with
// the manager's client, scheme and event recorder, as the operator-sdk
// tutorial does.
func (r *MemcachedReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Client = mgr.GetClient()
	r.Scheme = mgr.GetScheme()
	r.Recorder = mgr.GetEventRecorder("memcached-controller")
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Memcached{}).
		Owns(&appsv1.Deployment{}).
		Named(ControllerName).
		Complete(r)
}

// SetupWithServer runs the same reconciler in a polyop sidecar: its client
// and event recorder go through the host's Cluster service, and the host
// watches Memcacheds and the Deployments they own.
func (r *MemcachedReconciler) SetupWithServer(srv *sidecar.Server) error {
	r.Client = srv.GetClient()
	r.Scheme = srv.Scheme()
	r.Recorder = srv.GetEventRecorder("memcached-controller")
	return sidecar.NewControllerManagedBy[*v1.Memcached](srv).
		Owns(&appsv1.Deployment{}).
		Named(ControllerName).
		CompleteRequests(r)
}
