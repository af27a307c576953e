package sidecartest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

// scaler is a small reconciler: it reports the desired replicas as ready, and
// fails on a deployment named "broken".
type scaler struct{}

func (scaler) Reconcile(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
	if d.Name == "broken" {
		return sidecar.Result{}, sidecar.TerminalError(fmt.Errorf("deployment %s is broken", d.Name))
	}
	req, _ := sidecar.RequestFromContext(ctx)
	d.Status.ObservedGeneration = d.Generation
	if d.Spec.Replicas != nil {
		d.Status.ReadyReplicas = *d.Spec.Replicas
	}
	sidecar.Recorder(ctx).Event(corev1.EventTypeNormal, "Scaled", fmt.Sprintf("attempt %d", req.Retries+1), sidecar.WithAction("Scaling"))
	return sidecar.Result{RequeueAfter: time.Minute}, nil
}

func (scaler) ReconcileDeleted(ctx context.Context, req sidecar.Request) (sidecar.Result, error) {
	return sidecar.Result{RequeueAfter: time.Duration(len(req.Name)) * time.Second}, nil
}

func newHarness(t *testing.T) *sidecartest.Harness {
	t.Helper()
	srv, err := sidecar.New(sidecar.Options{Name: "test", Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Named("scaler").Complete(scaler{}); err != nil {
		t.Fatal(err)
	}
	return sidecartest.New(t, srv)
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Generation: 4},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas},
		Status:     appsv1.DeploymentStatus{ReadyReplicas: 1, ObservedGeneration: 3},
	}
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		object      *appsv1.Deployment
		opts        []sidecartest.RequestOption
		wantErr     *sidecartest.Error
		wantResult  sidecar.Result
		wantReady   int32
		wantEvents  []sidecartest.Event
		wantObsGen  int64
		wantUpdated bool
	}{
		"if the reconciler succeeds, then Status gives the object with the new status": {
			object:     deployment("web", 3),
			wantResult: sidecar.Result{RequeueAfter: time.Minute},
			wantReady:  3, wantObsGen: 4,
			wantEvents: []sidecartest.Event{{Type: "Normal", Reason: "Scaled", Message: "attempt 1", Action: "Scaling"}},
		},
		"if the request is a retry, then the reconciler sees the retry count": {
			object:     deployment("web", 3),
			opts:       []sidecartest.RequestOption{sidecartest.WithRetries(2)},
			wantResult: sidecar.Result{RequeueAfter: time.Minute},
			wantReady:  3, wantObsGen: 4,
			wantEvents: []sidecartest.Event{{Type: "Normal", Reason: "Scaled", Message: "attempt 3", Action: "Scaling"}},
		},
		"if the reconciler fails terminally, then Err says so and the status is the object's own": {
			object:    deployment("broken", 3),
			wantErr:   &sidecartest.Error{Message: "deployment broken is broken", Terminal: true},
			wantReady: 1, wantObsGen: 3,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := newHarness(t).Reconcile(t.Context(), "scaler", tc.object, tc.opts...)
			if fmt.Sprint(res.Err) != fmt.Sprint(tc.wantErr) {
				t.Errorf("error = %+v, want %+v", res.Err, tc.wantErr)
			}
			if res.Result != tc.wantResult {
				t.Errorf("result = %+v, want %+v", res.Result, tc.wantResult)
			}
			if fmt.Sprint(res.Events) != fmt.Sprint(tc.wantEvents) {
				t.Errorf("events = %+v, want %+v", res.Events, tc.wantEvents)
			}
			got := &appsv1.Deployment{Status: appsv1.DeploymentStatus{Replicas: 99}}
			res.Status(got)
			if got.Status.ReadyReplicas != tc.wantReady || got.Status.ObservedGeneration != tc.wantObsGen {
				t.Errorf("status = %+v", got.Status)
			}
			if got.Status.Replicas != 0 {
				t.Error("Status did not reset the object it decoded into")
			}
			if got.Name != tc.object.Name || got.Kind != "Deployment" || got.APIVersion != "apps/v1" {
				t.Errorf("object = %s %s/%s", got.APIVersion, got.Kind, got.Name)
			}
			if tc.object.Status.ReadyReplicas != 1 {
				t.Error("the harness changed the object it was given")
			}
		})
	}
}

func TestNewRequestLooksLikeTheHosts(t *testing.T) {
	t.Parallel()
	req := newHarness(t).NewRequest("scaler", deployment("web", 1), sidecartest.WithRetries(5))
	if req.GetController() != "scaler" || req.GetRetries() != 5 {
		t.Errorf("request = %v", req)
	}
	if k := req.GetKind(); k.GetGroup() != "apps" || k.GetVersion() != "v1" || k.GetKind() != "Deployment" {
		t.Errorf("kind = %v", k)
	}
	if key := req.GetKey(); key.GetNamespace() != "default" || key.GetName() != "web" {
		t.Errorf("key = %v", key)
	}
	var obj map[string]any
	if err := json.Unmarshal(req.GetObject(), &obj); err != nil {
		t.Fatal(err)
	}
	if obj["apiVersion"] != "apps/v1" || obj["kind"] != "Deployment" {
		t.Errorf("the object's JSON has apiVersion %v and kind %v", obj["apiVersion"], obj["kind"])
	}
}

func TestReconcileDeleted(t *testing.T) {
	t.Parallel()
	res := newHarness(t).ReconcileDeleted(t.Context(), "scaler", types.NamespacedName{Namespace: "default", Name: "gone"})
	if res.Result.RequeueAfter != 4*time.Second || res.Err != nil || res.HasStatus() {
		t.Errorf("response = %v", res.Raw)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	resp := newHarness(t).Describe()
	if resp.GetName() != "test" || len(resp.GetControllers()) != 1 || resp.GetControllers()[0].GetName() != "scaler" {
		t.Errorf("Describe = %v", resp)
	}
}

// fatalT records a fatal failure instead of failing the test.
type fatalT struct {
	testing.TB
	mu      sync.Mutex
	message string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatal(args ...any) { f.fail(fmt.Sprint(args...)) }

func (f *fatalT) Fatalf(format string, args ...any) { f.fail(fmt.Sprintf(format, args...)) }

func (f *fatalT) fail(message string) {
	f.mu.Lock()
	f.message = message
	f.mu.Unlock()
	runtime.Goexit()
}

// fatal runs fn with a fatalT and returns the fatal message, "" if none.
func fatal(t *testing.T, fn func(t testing.TB)) string {
	ft := &fatalT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ft)
	}()
	<-done
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.message
}

func TestTheHarnessFailsTheTest(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		run     func(ctx context.Context, t testing.TB, srv *sidecar.Server)
		wantMsg string
	}{
		"if the controller is unknown, then Reconcile fails the test": {
			run: func(ctx context.Context, t testing.TB, srv *sidecar.Server) {
				sidecartest.New(t, srv).Reconcile(ctx, "nginx", deployment("web", 1))
			},
			wantMsg: `no controller named "nginx"`,
		},
		"if an event cannot cross the wire, then Reconcile fails the test": {
			run: func(ctx context.Context, t testing.TB, srv *sidecar.Server) {
				sidecartest.New(t, srv).Reconcile(ctx, "utf8", deployment("web", 1))
			},
			wantMsg: "cannot cross the wire",
		},
		"if the type is not in the scheme, then Reconcile fails the test": {
			run: func(ctx context.Context, t testing.TB, srv *sidecar.Server) {
				sidecartest.New(t, srv).Reconcile(ctx, "scaler", &struct{ appsv1.Deployment }{})
			},
			wantMsg: "finding the kind",
		},
		"if the request was a deletion, then Status fails the test": {
			run: func(ctx context.Context, t testing.TB, srv *sidecar.Server) {
				res := sidecartest.New(t, srv).ReconcileDeleted(ctx, "scaler", types.NamespacedName{Name: "x"})
				res.Status(&appsv1.Deployment{})
			},
			wantMsg: "there is no status",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, err := sidecar.New(sidecar.Options{Name: "test", Logger: testr.New(t)})
			if err != nil {
				t.Fatal(err)
			}
			if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Named("scaler").Complete(scaler{}); err != nil {
				t.Fatal(err)
			}
			if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Named("utf8").Complete(
				sidecar.ReconcilerFunc[*appsv1.Deployment](func(ctx context.Context, _ *appsv1.Deployment) (sidecar.Result, error) {
					sidecar.Recorder(ctx).Event(corev1.EventTypeNormal, "Bad", "\xff")
					return sidecar.Result{}, nil
				})); err != nil {
				t.Fatal(err)
			}
			got := fatal(t, func(ft testing.TB) { tc.run(t.Context(), ft, srv) })
			if !strings.Contains(got, tc.wantMsg) {
				t.Errorf("fatal message = %q, want one containing %q", got, tc.wantMsg)
			}
		})
	}
}
