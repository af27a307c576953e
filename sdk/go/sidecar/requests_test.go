package sidecar_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

// scaleReporter is an ordinary controller-runtime reconciler: it reads the
// Deployment through its client and writes the status itself.
type scaleReporter struct {
	client.Client
	requests []ctrl.Request
}

func (r *scaleReporter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.requests = append(r.requests, req)
	var d appsv1.Deployment
	if err := r.Get(ctx, req.NamespacedName, &d); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	d.Status.ObservedGeneration = d.Generation
	if err := r.Status().Update(ctx, &d); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: time.Minute}, nil
}

func TestCompleteRequestsRunsAControllerRuntimeReconciler(t *testing.T) {
	t.Parallel()
	d := deployment(4)
	d.Status.ObservedGeneration = 1
	r := &scaleReporter{Client: fake.NewClientBuilder().WithObjects(d.DeepCopy()).WithStatusSubresource(&appsv1.Deployment{}).Build()}
	srv := newServer(t)
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).CompleteRequests(r); err != nil {
		t.Fatal(err)
	}
	h := sidecartest.New(t, srv)
	key := types.NamespacedName{Namespace: "default", Name: "web"}

	res := h.Reconcile(t.Context(), "deployment", d)
	if res.Err != nil || res.Result.RequeueAfter != time.Minute {
		t.Fatalf("response = %+v", res.Raw)
	}
	if res.HasStatus() {
		t.Errorf("the response carries a status (%s): the reconciler writes its own", res.Raw.GetStatus())
	}
	var got appsv1.Deployment
	if err := r.Get(t.Context(), key, &got); err != nil || got.Status.ObservedGeneration != 4 {
		t.Errorf("the reconciler's own status write: %v, %+v", err, got.Status)
	}

	h.ReconcileDeleted(t.Context(), "deployment", key)
	if len(r.requests) != 2 || r.requests[0].NamespacedName != key || r.requests[1].NamespacedName != key {
		t.Errorf("requests = %v, want the key twice, also for the deletion", r.requests)
	}

	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](newServer(t)).CompleteRequests(nil); err == nil {
		t.Error("a nil reconciler was accepted")
	}
	var nilReporter *scaleReporter
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](newServer(t)).CompleteRequests(nilReporter); err == nil {
		t.Error("a nil pointer reconciler was accepted")
	}
}
