package controller_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/polyop/polyop/examples/go/memcached/api/v1"
	"github.com/polyop/polyop/examples/go/memcached/internal/controller"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

var key = types.NamespacedName{Namespace: "default", Name: "cache"}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

func memcached(size int32) *v1.Memcached {
	return &v1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec:       v1.MemcachedSpec{Size: size},
	}
}

// newReconciler returns the reconciler on a fake client holding objs.
func newReconciler(t *testing.T, objs ...client.Object) (*controller.MemcachedReconciler, *events.FakeRecorder) {
	t.Helper()
	scheme := newScheme(t)
	recorder := events.NewFakeRecorder(10)
	return &controller.MemcachedReconciler{
		Client: fake.NewClientBuilder().
			WithScheme(scheme).
			WithObjects(objs...).
			WithStatusSubresource(&v1.Memcached{}).
			Build(),
		Scheme:   scheme,
		Recorder: recorder,
	}, recorder
}

func reconcile(t *testing.T, r *controller.MemcachedReconciler) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(ctrl.LoggerInto(t.Context(), testr.New(t)), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func get[T client.Object](t *testing.T, c client.Client, obj T) T {
	t.Helper()
	if err := c.Get(t.Context(), key, obj); err != nil {
		t.Fatalf("getting %T: %v", obj, err)
	}
	return obj
}

func TestReconcileCreatesTheDeploymentThenReportsIt(t *testing.T) {
	t.Parallel()
	r, _ := newReconciler(t, memcached(2))

	res := reconcile(t, r)
	if res.RequeueAfter == 0 {
		t.Error("the first reconcile does not come back to check the new deployment")
	}
	m := get(t, r.Client, &v1.Memcached{})
	if !strings.Contains(strings.Join(m.Finalizers, ","), controller.Finalizer) {
		t.Errorf("finalizers = %v", m.Finalizers)
	}
	if c := meta.FindStatusCondition(m.Status.Conditions, controller.TypeAvailable); c == nil || c.Status != metav1.ConditionUnknown {
		t.Errorf("Available after the first reconcile = %+v, want Unknown", c)
	}
	d := get(t, r.Client, &appsv1.Deployment{})
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != controller.DefaultImage {
		t.Errorf("deployment spec = %+v", d.Spec)
	}
	if owner := metav1.GetControllerOf(d); owner == nil || owner.Kind != "Memcached" || owner.Name != "cache" {
		t.Errorf("the deployment's controller is %+v", owner)
	}

	reconcile(t, r)
	m = get(t, r.Client, &v1.Memcached{})
	c := meta.FindStatusCondition(m.Status.Conditions, controller.TypeAvailable)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "with 2 replicas") {
		t.Errorf("Available after the second reconcile = %+v", c)
	}
}

func TestReconcileKeepsTheSize(t *testing.T) {
	t.Parallel()
	r, _ := newReconciler(t, memcached(2))
	reconcile(t, r)
	reconcile(t, r)

	m := get(t, r.Client, &v1.Memcached{})
	m.Spec.Size = 4
	if err := r.Update(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	reconcile(t, r)
	if d := get(t, r.Client, &appsv1.Deployment{}); *d.Spec.Replicas != 4 {
		t.Errorf("replicas = %d, want 4", *d.Spec.Replicas)
	}
	reconcile(t, r)
	m = get(t, r.Client, &v1.Memcached{})
	if c := meta.FindStatusCondition(m.Status.Conditions, controller.TypeAvailable); c == nil || !strings.Contains(c.Message, "with 4 replicas") {
		t.Errorf("Available = %+v", c)
	}
}

func TestReconcileFinalizesADeletedMemcached(t *testing.T) {
	t.Parallel()
	r, recorder := newReconciler(t, memcached(1))
	reconcile(t, r)
	if err := r.Delete(t.Context(), memcached(1)); err != nil {
		t.Fatal(err)
	}
	// The finalizer holds the object: it is being deleted.
	if m := get(t, r.Client, &v1.Memcached{}); m.DeletionTimestamp == nil {
		t.Fatal("the memcached has no deletion timestamp")
	}
	reconcile(t, r)
	if err := r.Get(t.Context(), key, &v1.Memcached{}); !apierrors.IsNotFound(err) {
		t.Errorf("after finalizing, the memcached is still there: %v", err)
	}
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, "Warning Deleting") || !strings.Contains(e, "cache is being deleted") {
			t.Errorf("event = %q", e)
		}
	default:
		t.Error("no event was recorded")
	}
	if res := reconcile(t, r); res != (ctrl.Result{}) {
		t.Errorf("a gone memcached reconciles to %+v", res)
	}
}

// TestTheSidecarRunsTheSameReconciler reconciles through a sidecar.Server, as
// the host would, with the reconciler's client replaced by a fake one.
func TestTheSidecarRunsTheSameReconciler(t *testing.T) {
	t.Parallel()
	scheme := newScheme(t)
	srv, err := sidecar.New(sidecar.Options{Name: "test", Scheme: scheme, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.MemcachedReconciler{}
	if err := r.SetupWithServer(srv); err != nil {
		t.Fatal(err)
	}
	if r.Client == nil || r.Recorder == nil || r.Scheme != scheme {
		t.Fatal("SetupWithServer did not give the reconciler the Server's client, recorder and scheme")
	}
	fresh, _ := newReconciler(t, memcached(3))
	r.Client = fresh.Client

	h := sidecartest.New(t, srv)
	c := h.Describe().GetControllers()[0]
	if c.GetName() != controller.ControllerName || len(c.GetOwns()) != 1 || c.GetOwns()[0].GetKind().GetKind() != "Deployment" {
		t.Errorf("description = %v", c)
	}

	res := h.Reconcile(t.Context(), controller.ControllerName, memcached(3))
	if res.Err != nil {
		t.Fatal(res.Err.Message)
	}
	if res.HasStatus() {
		t.Error("the response carries a status: the reconciler writes its own")
	}
	if d := get(t, r.Client, &appsv1.Deployment{}); *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d", *d.Spec.Replicas)
	}
	if res := h.ReconcileDeleted(context.Background(), controller.ControllerName, types.NamespacedName{Namespace: "default", Name: "gone"}); res.Err != nil {
		t.Errorf("a gone memcached: %s", res.Err.Message)
	}
}
