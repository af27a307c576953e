package sidecar_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

func newServer(t *testing.T) *sidecar.Server {
	t.Helper()
	srv, err := sidecar.New(sidecar.Options{Name: "test", Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// describe answers the host's handshake as srv would at start: what the
// examples print of a sidecar.
func describe(srv *sidecar.Server) *polyopv1alpha1.DescribeResponse {
	resp, err := sidecar.Service(srv).Describe(context.Background(), &polyopv1alpha1.DescribeRequest{ProtocolVersion: sidecar.ProtocolVersion})
	if err != nil {
		panic(err)
	}
	return resp
}

func deployment(generation int64) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "web", Generation: generation, ResourceVersion: "7",
	}}
}

var deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

func TestNewValidatesOptions(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		opts    sidecar.Options
		wantErr string
	}{
		"if the name is missing, then New fails":          {opts: sidecar.Options{}, wantErr: "Name is required"},
		"if the name has upper case, then New fails":      {opts: sidecar.Options{Name: "Test"}, wantErr: "not a valid name"},
		"if the name has a dot, then New fails":           {opts: sidecar.Options{Name: "a.b"}, wantErr: "not a valid name"},
		"if the message size is negative, then New fails": {opts: sidecar.Options{Name: "a", MaxMessageSize: -1}, wantErr: "MaxMessageSize"},
		"if the options are valid, then New succeeds":     {opts: sidecar.Options{Name: "my-operator"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, err := sidecar.New(tc.opts)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if srv.Scheme() != clientgoscheme.Scheme {
					t.Error("the scheme does not default to client-go's")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

type nopReconciler[T any] struct{}

func (nopReconciler[T]) Reconcile(context.Context, T) (sidecar.Result, error) {
	return sidecar.Result{}, nil
}

func TestCompleteRejectsInvalidRegistrations(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		register func(srv *sidecar.Server) error
		wantErr  string
	}{
		"if the type is not in the scheme, then Complete fails": {
			register: func(srv *sidecar.Server) error {
				return sidecar.NewControllerManagedBy[*unregistered](srv).Complete(nopReconciler[*unregistered]{})
			},
			wantErr: "finding its kind",
		},
		"if an unstructured type has no prototype, then Complete fails": {
			register: func(srv *sidecar.Server) error {
				return sidecar.NewControllerManagedBy[*unstructured.Unstructured](srv).Complete(nopReconciler[*unstructured.Unstructured]{})
			},
			wantErr: "finding its kind",
		},
		"if two controllers share a name, then the second Complete fails": {
			register: func(srv *sidecar.Server) error {
				if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Complete(nopReconciler[*appsv1.Deployment]{}); err != nil {
					return err
				}
				return sidecar.NewControllerManagedBy[*corev1.ConfigMap](srv).Named("deployment").Complete(nopReconciler[*corev1.ConfigMap]{})
			},
			wantErr: `"deployment" is already registered`,
		},
		"if the name has upper case, then Complete fails": {
			register: func(srv *sidecar.Server) error {
				return sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Named("Web").Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: `controller name "Web"`,
		},
		"if an update filter is unspecified, then Complete fails": {
			register: func(srv *sidecar.Server) error {
				return sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
					WithUpdateFilters(polyopv1alpha1.UpdateFilter_UPDATE_FILTER_UNSPECIFIED).Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: "is not an update filter",
		},
		"if the label selector does not parse, then Complete fails": {
			register: func(srv *sidecar.Server) error {
				return sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
					WithLabelSelector("a in (").Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: "label selector",
		},
		"if a namespace is not a valid name, then Complete fails": {
			register: func(srv *sidecar.Server) error {
				return sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
					InNamespaces("Default").Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: `namespace "Default"`,
		},
		"if the concurrency is negative, then Complete fails": {
			register: func(srv *sidecar.Server) error {
				return sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
					WithMaxConcurrentReconciles(-1).Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: "max concurrent reconciles",
		},
		"if the reconciler is nil, then Complete fails": {
			register: func(srv *sidecar.Server) error {
				return sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Complete(nil)
			},
			wantErr: "the reconciler is nil",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := tc.register(newServer(t))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// unregistered is a kind no scheme knows.
type unregistered struct{ corev1.ConfigMap }

func TestDescribeIsBuiltFromTheRegistrations(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
		WithUpdateFilters(sidecar.GenerationChanged, sidecar.LabelsChanged, sidecar.GenerationChanged).
		WithLabelSelector("app=web").
		InNamespaces("a", "b", "a").
		WithMaxConcurrentReconciles(3).
		WithSkipUnchangedInputs(true).
		Complete(nopReconciler[*appsv1.Deployment]{}); err != nil {
		t.Fatal(err)
	}
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	if err := sidecar.NewControllerManagedBy[*unstructured.Unstructured](srv).For(cm).Named("configs").
		Complete(nopReconciler[*unstructured.Unstructured]{}); err != nil {
		t.Fatal(err)
	}

	resp := sidecartest.New(t, srv).Describe()
	if resp.GetProtocolVersion() != sidecar.ProtocolVersion || resp.GetName() != "test" {
		t.Errorf("protocol version %v, name %q", resp.GetProtocolVersion(), resp.GetName())
	}
	if resp.GetSdkName() != "polyop-go" || resp.GetSdkVersion() != sidecar.SDKVersion || sidecar.SDKVersion == "" {
		t.Errorf("sdk %q %q, want polyop-go and the SDK's version", resp.GetSdkName(), resp.GetSdkVersion())
	}
	if len(resp.GetControllers()) != 2 {
		t.Fatalf("got %d controllers, want 2", len(resp.GetControllers()))
	}
	deploy, configs := resp.GetControllers()[0], resp.GetControllers()[1]
	if deploy.GetName() != "deployment" {
		t.Errorf("default name = %q, want the lower-case kind", deploy.GetName())
	}
	if k := deploy.GetForKind(); k.GetGroup() != "apps" || k.GetVersion() != "v1" || k.GetKind() != "Deployment" {
		t.Errorf("for_kind = %v", k)
	}
	wantFilters := []polyopv1alpha1.UpdateFilter{sidecar.GenerationChanged, sidecar.LabelsChanged}
	if got := deploy.GetPredicates().GetUpdateFilters(); !slices.Equal(got, wantFilters) {
		t.Errorf("update filters = %v, want %v (deduplicated, in order)", got, wantFilters)
	}
	if got := deploy.GetPredicates().GetLabelSelector(); got != "app=web" {
		t.Errorf("label selector = %q", got)
	}
	if got := deploy.GetNamespaces(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("namespaces = %v", got)
	}
	if got := deploy.GetMaxConcurrentReconciles(); got != 3 {
		t.Errorf("max concurrent reconciles = %d", got)
	}
	if !deploy.GetSkipUnchangedInputs() || configs.GetSkipUnchangedInputs() {
		t.Errorf("skip unchanged inputs = %v and %v, want true as declared and false by default", deploy.GetSkipUnchangedInputs(), configs.GetSkipUnchangedInputs())
	}
	if configs.GetName() != "configs" || configs.GetForKind().GetKind() != "ConfigMap" || configs.GetPredicates() != nil {
		t.Errorf("unstructured controller = %v", configs)
	}
}

func TestDescribeAnswersAHostOfAnotherVersion(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	resp, err := sidecar.Service(srv).Describe(t.Context(), &polyopv1alpha1.DescribeRequest{ProtocolVersion: polyopv1alpha1.ProtocolVersion(9)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetProtocolVersion() != sidecar.ProtocolVersion {
		t.Errorf("protocol version = %v", resp.GetProtocolVersion())
	}
}

// deploymentReconciler records what it saw and does what it is told.
type deploymentReconciler struct {
	reconcile func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error)
}

func (r *deploymentReconciler) Reconcile(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
	return r.reconcile(ctx, d)
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	observe := func(_ context.Context, d *appsv1.Deployment) {
		d.Status.ObservedGeneration = d.Generation
		d.Status.Replicas = 3
	}
	const observed, untouched = `{"observedGeneration":2,"replicas":3}`, `{}`
	tests := map[string]struct {
		reconcile  func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error)
		retries    int
		wantResult sidecar.Result
		wantErr    *sidecartest.Error
		// wantStatus is the status JSON the response carries; "" for none.
		wantStatus string
		wantEvents []sidecartest.Event
	}{
		"if the reconciler succeeds, then its status is returned": {
			reconcile: func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
				observe(ctx, d)
				return sidecar.Result{}, nil
			},
			wantStatus: observed,
		},
		"if the reconciler asks to requeue after a while, then the response says so": {
			reconcile: func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
				observe(ctx, d)
				return sidecar.Result{RequeueAfter: 90 * time.Second}, nil
			},
			wantResult: sidecar.Result{RequeueAfter: 90 * time.Second},
			wantStatus: observed,
		},
		"if the reconciler fails, then the error is transient and the status is still returned": {
			reconcile: func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
				observe(ctx, d)
				return sidecar.Result{}, fmt.Errorf("talking to the backend: %w", errors.New("refused"))
			},
			wantErr:    &sidecartest.Error{Message: "talking to the backend: refused"},
			wantStatus: observed,
		},
		"if the reconciler fails terminally, then the error is terminal and its message is the wrapped one": {
			reconcile: func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
				observe(ctx, d)
				return sidecar.Result{}, sidecar.TerminalError(errors.New("spec.replicas is negative"))
			},
			wantErr:    &sidecartest.Error{Message: "spec.replicas is negative", Terminal: true},
			wantStatus: observed,
		},
		"if a terminal error is wrapped, then it is still terminal": {
			reconcile: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return sidecar.Result{}, fmt.Errorf("validating: %w", sidecar.TerminalError(errors.New("bad")))
			},
			wantErr:    &sidecartest.Error{Message: "validating: terminal error: bad", Terminal: true},
			wantStatus: untouched,
		},
		"if the reconciler fails with a temporary error, then the failure says when to retry": {
			reconcile: func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
				observe(ctx, d)
				return sidecar.Result{}, sidecar.TemporaryError(errors.New("the backend says retry in 30s"), 30*time.Second)
			},
			wantErr:    &sidecartest.Error{Message: "the backend says retry in 30s", RetryAfter: 30 * time.Second},
			wantStatus: observed,
		},
		"if a temporary error is wrapped, then it still says when to retry": {
			reconcile: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return sidecar.Result{}, fmt.Errorf("calling the backend: %w", sidecar.TemporaryError(errors.New("busy"), time.Minute))
			},
			wantErr:    &sidecartest.Error{Message: "calling the backend: busy", RetryAfter: time.Minute},
			wantStatus: untouched,
		},
		"if a temporary error has no delay, then it is retried with the backoff": {
			reconcile: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return sidecar.Result{}, sidecar.TemporaryError(errors.New("busy"), 0)
			},
			wantErr:    &sidecartest.Error{Message: "busy"},
			wantStatus: untouched,
		},
		"if an error of another type has a RetryAfter method, then it is retried with the backoff": {
			reconcile: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return sidecar.Result{}, retryAfterError{}
			},
			wantErr:    &sidecartest.Error{Message: "slow down"},
			wantStatus: untouched,
		},
		"if an error is both terminal and temporary, then it is terminal and says no delay": {
			reconcile: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return sidecar.Result{}, sidecar.TerminalError(sidecar.TemporaryError(errors.New("bad"), time.Minute))
			},
			wantErr:    &sidecartest.Error{Message: "bad", Terminal: true},
			wantStatus: untouched,
		},
		"if the reconciler asks to requeue without a delay, then it is a transient failure that says to use RequeueAfter": {
			reconcile: func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
				observe(ctx, d)
				return sidecar.Result{Requeue: true}, nil //nolint:staticcheck // The deprecated field is what is tested.
			},
			wantErr: &sidecartest.Error{Message: "the reconciler returned Result{Requeue: true}, which polyop does not support (controller-runtime deprecates it): " +
				"return Result{RequeueAfter: d} to reconcile again after d, or an error (TemporaryError to say when) to retry; retrying with backoff"},
			wantStatus: observed,
		},
		"if the reconciler asks to requeue with a delay, then RequeueAfter wins, as in controller-runtime": {
			reconcile: func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return sidecar.Result{Requeue: true, RequeueAfter: time.Second}, nil //nolint:staticcheck // The deprecated field is what is tested.
			},
			wantResult: sidecar.Result{RequeueAfter: time.Second},
			wantStatus: untouched,
		},
		"if the reconciler panics, then the panic is a transient error and no status is returned": {
			reconcile: func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
				observe(ctx, d)
				sidecar.Recorder(ctx).Event(corev1.EventTypeNormal, "Started", "before the panic")
				panic("boom")
			},
			wantErr:    &sidecartest.Error{Message: "panic: boom [recovered]"},
			wantEvents: []sidecartest.Event{{Type: "Normal", Reason: "Started", Message: "before the panic"}},
		},
		"if the reconciler records events, then they are returned in order": {
			reconcile: func(ctx context.Context, _ *appsv1.Deployment) (sidecar.Result, error) {
				r := sidecar.Recorder(ctx)
				r.Event(corev1.EventTypeNormal, "Scaled", "scaled to 3")
				r.Eventf(corev1.EventTypeWarning, "Slow", "took %ds", 5)
				r.Event(corev1.EventTypeNormal, "Rolled", "rolled out", sidecar.WithAction("RollingOut"))
				r.EventWithAction(corev1.EventTypeNormal, "Restarted", "Restarting", "restarted") // deprecated, and still the same event
				r.Event("Odd", "Typo", "unknown type")
				return sidecar.Result{}, nil
			},
			wantEvents: []sidecartest.Event{
				{Type: "Normal", Reason: "Scaled", Message: "scaled to 3"},
				{Type: "Warning", Reason: "Slow", Message: "took 5s"},
				{Type: "Normal", Reason: "Rolled", Message: "rolled out", Action: "RollingOut"},
				{Type: "Normal", Reason: "Restarted", Message: "restarted", Action: "Restarting"},
				{Type: "", Reason: "Typo", Message: "unknown type"},
			},
			wantStatus: untouched,
		},
		"if the request is a retry, then the reconciler sees the retry count": {
			retries: 4,
			reconcile: func(ctx context.Context, _ *appsv1.Deployment) (sidecar.Result, error) {
				req, _ := sidecar.RequestFromContext(ctx)
				return sidecar.Result{RequeueAfter: time.Duration(req.Retries) * time.Second}, nil
			},
			wantResult: sidecar.Result{RequeueAfter: 4 * time.Second},
			wantStatus: untouched,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t)
			if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
				Complete(&deploymentReconciler{reconcile: tc.reconcile}); err != nil {
				t.Fatal(err)
			}
			res := sidecartest.New(t, srv).Reconcile(t.Context(), "deployment", deployment(2), sidecartest.WithRetries(tc.retries))

			if res.Result != tc.wantResult {
				t.Errorf("result = %+v, want %+v", res.Result, tc.wantResult)
			}
			switch {
			case tc.wantErr == nil && res.Err != nil:
				t.Errorf("unexpected error %+v", *res.Err)
			case tc.wantErr != nil && (res.Err == nil || *res.Err != *tc.wantErr):
				t.Errorf("error = %+v, want %+v", res.Err, *tc.wantErr)
			}
			if !slices.Equal(res.Events, tc.wantEvents) {
				t.Errorf("events = %+v, want %+v", res.Events, tc.wantEvents)
			}
			if got := string(res.Raw.GetStatus()); got != tc.wantStatus || res.HasStatus() != (tc.wantStatus != "") {
				t.Fatalf("status = %q, want %q", got, tc.wantStatus)
			}
			if tc.wantStatus == observed {
				var got appsv1.Deployment
				res.Status(&got)
				if got.Status.ObservedGeneration != 2 || got.Name != "web" || got.ResourceVersion != "7" {
					t.Errorf("object with status = %+v", got)
				}
			}
		})
	}
}

func TestReconcileGivesTheRequestAndALoggerInTheContext(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	var got sidecar.Request
	var gotOK, loggerOK bool
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Named("web").Complete(
		sidecar.ReconcilerFunc[*appsv1.Deployment](func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
			got, gotOK = sidecar.RequestFromContext(ctx)
			loggerOK = logf.FromContext(ctx).GetSink() != nil
			if d.Kind != "Deployment" || d.APIVersion != "apps/v1" {
				t.Errorf("the object's type meta is %v", d.TypeMeta)
			}
			return sidecar.Result{}, nil
		})); err != nil {
		t.Fatal(err)
	}
	sidecartest.New(t, srv).Reconcile(t.Context(), "web", deployment(1), sidecartest.WithRetries(2))

	want := sidecar.Request{
		Controller:     "web",
		Kind:           deploymentGVK,
		NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"},
		Retries:        2,
	}
	if !gotOK || got != want {
		t.Errorf("request = %+v (%v), want %+v", got, gotOK, want)
	}
	if !loggerOK {
		t.Error("the context carries no logger")
	}
	if _, ok := sidecar.RequestFromContext(t.Context()); ok {
		t.Error("RequestFromContext found a request outside a reconcile")
	}
	sidecar.Recorder(t.Context()).Event(corev1.EventTypeNormal, "Dropped", "outside a reconcile")
}

func TestReconcileRejectsBrokenRequests(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Complete(nopReconciler[*appsv1.Deployment]{}); err != nil {
		t.Fatal(err)
	}
	h := sidecartest.New(t, srv)
	tests := map[string]struct {
		request  func() *polyopv1alpha1.ReconcileRequest
		wantCode codes.Code
		wantMsg  string
	}{
		"if the controller is unknown, then the answer is NotFound and lists the known ones": {
			request:  func() *polyopv1alpha1.ReconcileRequest { return h.NewRequest("nginx", deployment(1)) },
			wantCode: codes.NotFound,
			wantMsg:  `no controller named "nginx"; it has ["deployment"]`,
		},
		"if the object does not decode, then the answer is InvalidArgument naming the object": {
			request: func() *polyopv1alpha1.ReconcileRequest {
				req := h.NewRequest("deployment", deployment(1))
				req.Object = []byte(`{"metadata": {"name": 5}}`)
				return req
			},
			wantCode: codes.InvalidArgument,
			wantMsg:  "decoding Deployment default/web",
		},
		"if the object is not the one the key names, then the answer is InvalidArgument": {
			request: func() *polyopv1alpha1.ReconcileRequest {
				req := h.NewRequest("deployment", deployment(1))
				req.Key.Name = "other"
				return req
			},
			wantCode: codes.InvalidArgument,
			wantMsg:  "but the request is for default/other",
		},
		"if the key has no name, then the answer is InvalidArgument": {
			request: func() *polyopv1alpha1.ReconcileRequest {
				req := h.NewRequest("deployment", deployment(1))
				req.Key = nil
				return req
			},
			wantCode: codes.InvalidArgument,
			wantMsg:  "no object name",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := h.Call(t.Context(), tc.request())
			if status.Code(err) != tc.wantCode || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error = %v, want %s containing %q", err, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestReconcileOfAnObjectWithoutStatusReturnsNoStatus(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	if err := sidecar.NewControllerManagedBy[*corev1.ConfigMap](srv).Complete(nopReconciler[*corev1.ConfigMap]{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
	res := sidecartest.New(t, srv).Reconcile(t.Context(), "configmap", cm)
	if res.HasStatus() {
		t.Errorf("status = %s, want none", res.Raw.GetStatus())
	}
}

type deletionReconciler struct {
	nopReconciler[*appsv1.Deployment]
	deleted chan sidecar.Request
}

func (r *deletionReconciler) ReconcileDeleted(_ context.Context, req sidecar.Request) (sidecar.Result, error) {
	r.deleted <- req
	return sidecar.Result{}, errors.New("cleaning up")
}

func TestReconcileOfAGoneObject(t *testing.T) {
	t.Parallel()
	key := types.NamespacedName{Namespace: "default", Name: "web"}

	t.Run("if the reconciler implements DeletionReconciler, then it is told", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t)
		r := &deletionReconciler{deleted: make(chan sidecar.Request, 1)}
		if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Complete(r); err != nil {
			t.Fatal(err)
		}
		res := sidecartest.New(t, srv).ReconcileDeleted(t.Context(), "deployment", key)
		req := <-r.deleted
		if req.NamespacedName != key || req.Kind != deploymentGVK {
			t.Errorf("request = %+v", req)
		}
		if res.Err == nil || res.Err.Message != "cleaning up" || res.HasStatus() {
			t.Errorf("response = %+v", res.Raw)
		}
	})
	t.Run("if the reconciler does not, then the answer is empty", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t)
		called := false
		if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Complete(
			sidecar.ReconcilerFunc[*appsv1.Deployment](func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				called = true
				return sidecar.Result{}, nil
			})); err != nil {
			t.Fatal(err)
		}
		res := sidecartest.New(t, srv).ReconcileDeleted(t.Context(), "deployment", key)
		if called || res.Err != nil || res.HasStatus() || len(res.Events) > 0 || res.Result != (sidecar.Result{}) {
			t.Errorf("called = %v, response = %+v", called, res.Raw)
		}
	})
}

func TestReconcileOfUnstructuredObjects(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	prototype := &unstructured.Unstructured{}
	prototype.SetGroupVersionKind(schema.GroupVersionKind{Group: "examples.polyop.dev", Version: "v1", Kind: "Widget"})
	if err := sidecar.NewControllerManagedBy[*unstructured.Unstructured](srv).For(prototype).Complete(
		sidecar.ReconcilerFunc[*unstructured.Unstructured](func(_ context.Context, u *unstructured.Unstructured) (sidecar.Result, error) {
			size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
			return sidecar.Result{}, unstructured.SetNestedField(u.Object, size*2, "status", "double")
		})); err != nil {
		t.Fatal(err)
	}
	h := sidecartest.New(t, srv)
	obj := prototype.DeepCopy()
	obj.SetNamespace("default")
	obj.SetName("w")
	obj.Object["spec"] = map[string]any{"size": int64(1) << 60}
	res := h.Reconcile(t.Context(), "widget", obj)
	if res.Err != nil {
		t.Fatal(res.Err.Message)
	}
	if got := string(res.Raw.GetStatus()); got != `{"double":2305843009213693952}` {
		t.Errorf("status = %s: large integers must keep their precision", got)
	}
}

// retryAfterError is an error of a library of its own that says when to
// retry; only the SDK's TemporaryError sets Failure.retry_after.
type retryAfterError struct{}

func (retryAfterError) Error() string             { return "slow down" }
func (retryAfterError) RetryAfter() time.Duration { return time.Hour }
