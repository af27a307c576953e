package sidecar_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

// finalizingReconciler reconciles nothing and finalizes as it is told.
type finalizingReconciler struct {
	nopReconciler[*appsv1.Deployment]
	finalize func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error)
}

func (r *finalizingReconciler) Finalize(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
	return r.finalize(ctx, d)
}

func deleting() *appsv1.Deployment {
	d := deployment(3)
	now := metav1.Now()
	d.DeletionTimestamp = &now
	d.Finalizers = []string{"example.com/cleanup"}
	return d
}

func TestFinalize(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		finalize   func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error)
		wantDone   bool
		wantResult sidecar.Result
		wantErr    *sidecartest.Error
		wantEvents []sidecartest.Event
	}{
		"if Finalize succeeds, then the finalizer can go": {
			finalize: func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
				if d.DeletionTimestamp == nil || d.Kind != "Deployment" {
					return sidecar.Result{}, errors.New("the object is not the one being deleted")
				}
				sidecar.Recorder(ctx).Event(corev1.EventTypeNormal, "CleanedUp", "released the backend")
				return sidecar.Result{}, nil
			},
			wantDone:   true,
			wantEvents: []sidecartest.Event{{Type: "Normal", Reason: "CleanedUp", Message: "released the backend"}},
		},
		"if Finalize waits on something, then it is called again after a while": {
			finalize: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return sidecar.Result{RequeueAfter: 10 * time.Second}, nil
			},
			wantResult: sidecar.Result{RequeueAfter: 10 * time.Second},
		},
		"if Finalize fails, then the error is transient": {
			finalize: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return sidecar.Result{}, errors.New("the backend is down")
			},
			wantErr: &sidecartest.Error{Message: "the backend is down"},
		},
		"if Finalize fails terminally, then the error says so": {
			finalize: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return sidecar.Result{}, sidecar.TerminalError(errors.New("the backend refuses"))
			},
			wantErr: &sidecartest.Error{Message: "the backend refuses", Terminal: true},
		},
		"if Finalize asks to requeue without a delay, then it is an error, so the finalizer stays": {
			finalize: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return sidecar.Result{Requeue: true}, nil //nolint:staticcheck // The deprecated field is what is tested.
			},
			wantErr: &sidecartest.Error{Message: "the reconciler returned Result{Requeue: true}, which polyop does not support (controller-runtime deprecates it): " +
				"return Result{RequeueAfter: d} to reconcile again after d, or an error (TemporaryError to say when) to retry; retrying with backoff"},
		},
		"if Finalize fails with a temporary error, then the failure says when to retry": {
			finalize: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return sidecar.Result{}, sidecar.TemporaryError(errors.New("the backend is draining"), 20*time.Second)
			},
			wantErr: &sidecartest.Error{Message: "the backend is draining", RetryAfter: 20 * time.Second},
		},
		"if Finalize panics, then the panic is a transient error": {
			finalize: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				panic("boom")
			},
			wantErr: &sidecartest.Error{Message: "panic: boom [recovered]"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t)
			if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).WithFinalizer("example.com/cleanup").
				Complete(&finalizingReconciler{finalize: tc.finalize}); err != nil {
				t.Fatal(err)
			}
			res := sidecartest.New(t, srv).Finalize(t.Context(), "deployment", deleting())
			if res.Done() != tc.wantDone || res.Result != tc.wantResult {
				t.Errorf("done = %v, result = %+v", res.Done(), res.Result)
			}
			switch {
			case tc.wantErr == nil && res.Err != nil:
				t.Errorf("unexpected error %+v", *res.Err)
			case tc.wantErr != nil && (res.Err == nil || *res.Err != *tc.wantErr):
				t.Errorf("error = %+v, want %+v", res.Err, *tc.wantErr)
			}
			if len(res.Events) != len(tc.wantEvents) || (len(tc.wantEvents) > 0 && res.Events[0] != tc.wantEvents[0]) {
				t.Errorf("events = %+v, want %+v", res.Events, tc.wantEvents)
			}
		})
	}
}

func TestFinalizeRejectsBrokenRequests(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).WithFinalizer("example.com/cleanup").
		Complete(&finalizingReconciler{}); err != nil {
		t.Fatal(err)
	}
	if err := sidecar.NewControllerManagedBy[*corev1.ConfigMap](srv).Complete(nopReconciler[*corev1.ConfigMap]{}); err != nil {
		t.Fatal(err)
	}
	h := sidecartest.New(t, srv)
	tests := map[string]struct {
		request  func() *polyopv1alpha1.FinalizeRequest
		wantCode codes.Code
		wantMsg  string
	}{
		"if the controller is unknown, then the answer is NotFound": {
			request:  func() *polyopv1alpha1.FinalizeRequest { return h.NewFinalizeRequest("nginx", deleting()) },
			wantCode: codes.NotFound,
			wantMsg:  `no controller named "nginx"`,
		},
		"if the controller declares no finalizer, then the answer is FailedPrecondition": {
			request: func() *polyopv1alpha1.FinalizeRequest {
				return h.NewFinalizeRequest("configmap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c"}})
			},
			wantCode: codes.FailedPrecondition,
			wantMsg:  "declares no finalizer",
		},
		"if there is no object, then the answer is InvalidArgument": {
			request: func() *polyopv1alpha1.FinalizeRequest {
				req := h.NewFinalizeRequest("deployment", deleting())
				req.Object = nil
				return req
			},
			wantCode: codes.InvalidArgument,
			wantMsg:  "no object to finalize",
		},
		"if the object is not the one the key names, then the answer is InvalidArgument": {
			request: func() *polyopv1alpha1.FinalizeRequest {
				req := h.NewFinalizeRequest("deployment", deleting())
				req.Key.Name = "other"
				return req
			},
			wantCode: codes.InvalidArgument,
			wantMsg:  "but the request is for default/other",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := h.CallFinalize(t.Context(), tc.request())
			if status.Code(err) != tc.wantCode || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error = %v, want %s containing %q", err, tc.wantCode, tc.wantMsg)
			}
		})
	}
}
