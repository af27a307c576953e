package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// These tests run the Reconciler against controller-runtime's fake client,
// with ConfigMaps as the reconciled kind and Secrets as its children, to pin
// down the order of things: what is sent, what is written, and what is not.

// writes counts the writes the fake client sees, by kind of write.
type writes struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *writes) add(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[what]++
}

func (w *writes) take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.counts
	w.counts = map[string]int{}
	return c
}

func newFlow(t *testing.T, finalizer string, sc Sidecar, objs ...client.Object) (*Reconciler, client.Client, *writes) {
	t.Helper()
	w := &writes{counts: map[string]int{}}
	// The host's cache and client know every kind as object.Object.
	scheme := runtime.NewScheme()
	object.AddToScheme(scheme, configMapGVK, secretGVK)
	for i, o := range objs {
		objs[i] = asObject(t, o)
	}
	c := fake.NewClientBuilder().
		WithScheme(scheme).
		// object.Object has no schema of its own: apply deduces one.
		WithTypeConverters(managedfields.NewDeducedTypeConverter()).
		WithObjects(objs...).
		WithIndex(object.New(secretGVK), OwnerIndex, ownerUID).
		WithInterceptorFuncs(interceptor.Funcs{
			Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				w.add("apply")
				return c.Apply(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				w.add("patch")
				return c.Patch(ctx, obj, patch, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				w.add("delete " + obj.GetName())
				return c.Delete(ctx, obj, opts...)
			},
		}).
		Build()
	r := NewReconciler(description.Controller{Name: "maps", GVK: configMapGVK, Finalizer: finalizer}, c, sc, ReconcilerOptions{
		Children: []ChildKind{{GVK: secretGVK, Namespaced: true, SendObserved: true}},
	})
	return r, c, w
}

// ownerUID is OwnerIndex as the fake client's index function.
func ownerUID(obj client.Object) []string {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

func ownerMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "o", UID: "owner-uid"}}
}

// asObject converts a typed object (its kind set) to an object.Object.
func asObject(t *testing.T, typed client.Object) *object.Object {
	t.Helper()
	o := object.New(typed.GetObjectKind().GroupVersionKind())
	if err := json.Unmarshal(mustJSON(t, typed), o); err != nil {
		t.Fatal(err)
	}
	return o
}

func secretChild(name, value string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"` + name + `"},"stringData":{},"data":{"v":"` + value + `"}}`)
}

var req = reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "o"}}

func TestReconcileAppliesChangedChildrenOnlyAndPrunesOnlyWhenComplete(t *testing.T) {
	t.Parallel()
	var resp *polyopv1alpha1.ReconcileResponse
	sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse { return resp })}
	r, c, w := newFlow(t, "", sc, ownerMap())
	ctx := context.Background()
	run := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}

	resp = &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("a", "MQ=="), secretChild("b", "MQ==")}, ChildrenComplete: true}
	run()
	if got := w.take(); got["apply"] != 2 {
		t.Errorf("first reconcile: writes %v, want 2 applies", got)
	}
	s := object.New(secretGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "a"}, s); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != "owner-uid" {
		t.Errorf("child a has owner references %+v, want the owner as controller", s.OwnerReferences)
	}

	run()
	if got := w.take(); len(got) != 0 {
		t.Errorf("an unchanged answer wrote %v, want nothing", got)
	}
	if last := sc.Reconciles()[len(sc.Reconciles())-1]; len(last.GetObservedChildren()) != 2 {
		t.Errorf("the sidecar observed %d children, want 2", len(last.GetObservedChildren()))
	}

	// Someone else changes a field the controller manages: it is applied again.
	s.SetGroupVersionKind(secretGVK)
	tampered, err := s.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	tampered.Object["data"] = map[string]any{"v": "dGFtcGVyZWQ="}
	if err := c.Update(ctx, tampered); err != nil {
		t.Fatal(err)
	}
	w.take()
	run()
	if got := w.take(); got["apply"] != 1 {
		t.Errorf("after drift: writes %v, want 1 apply", got)
	}

	// b is no longer desired: kept while the answer is partial or failed,
	// deleted once it is complete.
	resp = &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("a", "MQ==")}}
	run()
	resp = &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("a", "MQ==")}, ChildrenComplete: true,
		Error: &polyopv1alpha1.Failure{Message: "later"}}
	if _, err := r.Reconcile(ctx, req); err == nil {
		t.Errorf("the sidecar's error was not returned")
	}
	if got := w.take(); got["delete b"] != 0 {
		t.Errorf("a partial or failed answer pruned: %v", got)
	}
	resp = &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("a", "MQ==")}, ChildrenComplete: true}
	run()
	if got := w.take(); got["delete b"] != 1 || got["apply"] != 0 || len(got) != 1 {
		t.Errorf("a complete answer without b: writes %v, want b deleted and nothing else", got)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "b"}, object.New(secretGVK)); !apierrors.IsNotFound(err) {
		t.Errorf("b still exists: %v", err)
	}

	// An invalid answer writes nothing at all.
	resp = &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("a", "Mg=="), []byte(`{}`)}, ChildrenComplete: true}
	_, err = r.Reconcile(ctx, req)
	if err == nil || !strings.Contains(err.Error(), "desired_children[1]") {
		t.Errorf("an invalid child: %v, want an error naming it", err)
	}
	if got := w.take(); len(got) != 0 {
		t.Errorf("an invalid answer wrote %v", got)
	}
}

func TestFinalizerIsAddedFirstAndRemovedAfterFinalize(t *testing.T) {
	t.Parallel()
	const finalizer = "example.com/cleanup"
	var finalizeResp *polyopv1alpha1.FinalizeResponse
	sc := &fakesidecar.Fake{
		OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
			return &polyopv1alpha1.ReconcileResponse{}
		}),
		OnFinalize: fakesidecar.Answer(func(*polyopv1alpha1.FinalizeRequest) *polyopv1alpha1.FinalizeResponse { return finalizeResp }),
	}
	r, c, _ := newFlow(t, finalizer, sc, ownerMap())
	ctx := context.Background()

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(sc.Reconciles()[0].GetObject(), &sent); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(sent.Metadata.Finalizers, finalizer) {
		t.Errorf("the first reconcile carried finalizers %v, want the finalizer added before it", sent.Metadata.Finalizers)
	}

	cm := object.New(configMapGVK)
	if err := c.Get(ctx, req.NamespacedName, cm); err != nil {
		t.Fatal(err)
	}
	cm.SetGroupVersionKind(configMapGVK) // the client's read clears it
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}

	finalizeResp = &polyopv1alpha1.FinalizeResponse{Error: &polyopv1alpha1.Failure{Message: "not yet"}}
	if _, err := r.Reconcile(ctx, req); err == nil || !strings.Contains(err.Error(), "not yet") {
		t.Errorf("a failed Finalize: %v, want its error", err)
	}
	cm = object.New(configMapGVK)
	if err := c.Get(ctx, req.NamespacedName, cm); err != nil || !slices.Contains(cm.Finalizers, finalizer) {
		t.Fatalf("after a failed Finalize the object is gone or lost its finalizer: %v %v", err, cm.Finalizers)
	}
	if n := len(sc.Reconciles()); n != 1 {
		t.Errorf("Reconcile was called %d times; an object being deleted goes to Finalize only", n)
	}

	finalizeResp = &polyopv1alpha1.FinalizeResponse{}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, req.NamespacedName, object.New(configMapGVK)); !apierrors.IsNotFound(err) {
		t.Errorf("after a successful Finalize the object still exists: %v %v", err, cm.Finalizers)
	}
	if len(sc.Finalizes()) != 2 || sc.Finalizes()[0].GetController() != "maps" || len(sc.Finalizes()[0].GetObject()) == 0 {
		t.Errorf("Finalize requests %v", sc.Finalizes())
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestTheObjectReadBackFromAWriteIsAsTheCacheHoldsIt(t *testing.T) {
	t.Parallel()
	const finalizer = "example.com/cleanup"
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keepManagedFields=%v", keep), func(t *testing.T) {
			t.Parallel()
			scheme := runtime.NewScheme()
			object.AddToScheme(scheme, configMapGVK)
			owner := ownerMap()
			owner.ManagedFields = []metav1.ManagedFieldsEntry{{
				Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`),
			}}
			c := fake.NewClientBuilder().
				WithScheme(scheme).
				WithTypeConverters(managedfields.NewDeducedTypeConverter()).
				WithReturnManagedFields().
				WithObjects(asObject(t, owner)).
				Build()
			sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
				return &polyopv1alpha1.ReconcileResponse{}
			})}
			r := NewReconciler(description.Controller{Name: "maps", GVK: configMapGVK, Finalizer: finalizer}, c, sc, ReconcilerOptions{KeepManagedFields: keep})
			if _, err := r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			// The first reconcile is sent the object as the finalizer's patch
			// returned it.
			var sent struct {
				Kind     string            `json:"kind"`
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal(sc.Reconciles()[0].GetObject(), &sent); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(sent.Metadata.Finalizers, finalizer) || sent.Kind != "ConfigMap" {
				t.Errorf("sent kind %q with finalizers %v, want the object as the patch returned it", sent.Kind, sent.Metadata.Finalizers)
			}
			if got := len(sent.Metadata.ManagedFields) > 0; got != keep {
				t.Errorf("the object sent carries managedFields: %v, want %v", got, keep)
			}
		})
	}
}
