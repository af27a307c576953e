package sidecar_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

func TestDescribeDeclaresOwnsWatchesAndTheFinalizer(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	secret := &unstructured.Unstructured{}
	secret.SetAPIVersion("v1")
	secret.SetKind("Secret")
	err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
		Owns(&corev1.ConfigMap{}, sidecar.SendObserved()).
		Owns(&corev1.Service{}).
		Owns(&batchv1.Job{}, sidecar.Adopt(), sidecar.ReplaceOnImmutable()).
		Watches(&corev1.ConfigMap{}, sidecar.MapByField("spec.template.spec.serviceAccountName")).
		Watches(secret, sidecar.MapByLabel("example.com/deployment")).
		Watches(&corev1.Pod{}, sidecar.MapByAnnotation("example.com/owner")).
		WithFinalizer("example.com/cleanup").
		Complete(&finalizingReconciler{})
	if err != nil {
		t.Fatal(err)
	}
	c := sidecartest.New(t, srv).Describe().GetControllers()[0]

	owns := c.GetOwns()
	if len(owns) != 3 || owns[0].GetKind().GetKind() != "ConfigMap" || !owns[0].GetSendObserved() ||
		owns[1].GetKind().GetKind() != "Service" || owns[1].GetSendObserved() || owns[1].GetAdopt() || owns[1].GetReplaceOnImmutable() ||
		owns[2].GetKind().GetKind() != "Job" || !owns[2].GetAdopt() || !owns[2].GetReplaceOnImmutable() || owns[2].GetSendObserved() {
		t.Errorf("owns = %v", owns)
	}
	watches := c.GetWatches()
	if len(watches) != 3 {
		t.Fatalf("watches = %v", watches)
	}
	if watches[0].GetKind().GetKind() != "ConfigMap" || watches[0].GetFieldPath() != "spec.template.spec.serviceAccountName" {
		t.Errorf("watches[0] = %v", watches[0])
	}
	if k := watches[1].GetKind(); k.GetVersion() != "v1" || k.GetKind() != "Secret" || watches[1].GetLabel() != "example.com/deployment" {
		t.Errorf("watches[1] = %v", watches[1])
	}
	if watches[2].GetAnnotation() != "example.com/owner" {
		t.Errorf("watches[2] = %v", watches[2])
	}
	if c.GetFinalizer() != "example.com/cleanup" {
		t.Errorf("finalizer = %q", c.GetFinalizer())
	}
}

func TestTheBuilderRefusesBadDeclarations(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		build   func(b *sidecar.Builder[*appsv1.Deployment]) error
		wantErr string
	}{
		"if a kind is owned twice, then Complete fails": {
			build: func(b *sidecar.Builder[*appsv1.Deployment]) error {
				return b.Owns(&corev1.ConfigMap{}).Owns(&corev1.ConfigMap{}, sidecar.SendObserved()).Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: "ConfigMap is owned twice",
		},
		"if an owned type is not in the scheme, then Complete fails": {
			build: func(b *sidecar.Builder[*appsv1.Deployment]) error {
				return b.Owns(&unregistered{}).Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: "finding the kind",
		},
		"if a field path names no field of the reconciled type, then Complete fails": {
			build: func(b *sidecar.Builder[*appsv1.Deployment]) error {
				return b.Watches(&corev1.ConfigMap{}, sidecar.MapByField("spec.configMapName")).Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: `has no field "spec.configMapName"`,
		},
		"if a field path names a field that is not a string, then Complete fails": {
			build: func(b *sidecar.Builder[*appsv1.Deployment]) error {
				return b.Watches(&corev1.ConfigMap{}, sidecar.MapByField("spec.replicas")).Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: "must hold a name, a string",
		},
		"if a field path is malformed, then Complete fails": {
			build: func(b *sidecar.Builder[*appsv1.Deployment]) error {
				return b.Watches(&corev1.ConfigMap{}, sidecar.MapByField("spec..name")).Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: "not a dot-separated field path",
		},
		"if a watch has no mapping, then Complete fails": {
			build: func(b *sidecar.Builder[*appsv1.Deployment]) error {
				return b.Watches(&corev1.ConfigMap{}, sidecar.WatchMapping{}).Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: "the mapping is empty",
		},
		"if a label is not a valid key, then Complete fails": {
			build: func(b *sidecar.Builder[*appsv1.Deployment]) error {
				return b.Watches(&corev1.ConfigMap{}, sidecar.MapByLabel("not a key")).Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: `label "not a key"`,
		},
		"if the finalizer has no domain, then Complete fails": {
			build: func(b *sidecar.Builder[*appsv1.Deployment]) error {
				return b.WithFinalizer("cleanup").Complete(&finalizingReconciler{})
			},
			wantErr: "needs a domain prefix",
		},
		"if the reconciler cannot finalize, then a finalizer is refused": {
			build: func(b *sidecar.Builder[*appsv1.Deployment]) error {
				return b.WithFinalizer("example.com/cleanup").Complete(nopReconciler[*appsv1.Deployment]{})
			},
			wantErr: "does not implement FinalizeReconciler",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := tc.build(sidecar.NewControllerManagedBy[*appsv1.Deployment](newServer(t)))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestMapByFieldLooksIntoInlinedAndMapFields(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"metadata.name", "metadata.labels.app", "spec.template.spec.serviceAccountName", "kind"} {
		err := sidecar.NewControllerManagedBy[*appsv1.Deployment](newServer(t)).
			Watches(&corev1.ConfigMap{}, sidecar.MapByField(path)).
			Complete(nopReconciler[*appsv1.Deployment]{})
		if err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(schema.GroupVersionKind{Group: "examples.polyop.dev", Version: "v1", Kind: "Widget"})
	err := sidecar.NewControllerManagedBy[*unstructured.Unstructured](newServer(t)).For(widget).
		Watches(&corev1.ConfigMap{}, sidecar.MapByField("spec.anything")).
		Complete(nopReconciler[*unstructured.Unstructured]{})
	if err != nil {
		t.Errorf("an unstructured kind's field paths cannot be checked and must pass: %v", err)
	}
}

// websiteLike desires a ConfigMap and a Service for each Deployment it
// reconciles, and reports the observed config maps in an annotation of its
// status-less view.
type websiteLike struct {
	desire   func(ctx context.Context, d *appsv1.Deployment) error
	observed []*corev1.ConfigMap
}

func (r *websiteLike) Reconcile(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
	observed, err := sidecar.ObservedChildren[*corev1.ConfigMap](ctx)
	if err != nil {
		return sidecar.Result{}, err
	}
	r.observed = observed
	return sidecar.Result{}, r.desire(ctx, d)
}

func newWebsiteLike(t *testing.T, desire func(ctx context.Context, d *appsv1.Deployment) error) (*sidecartest.Harness, *websiteLike) {
	t.Helper()
	srv := newServer(t)
	r := &websiteLike{desire: desire}
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
		Owns(&corev1.ConfigMap{}, sidecar.SendObserved()).
		Owns(&corev1.Service{}).
		Complete(r); err != nil {
		t.Fatal(err)
	}
	return sidecartest.New(t, srv), r
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "12", UID: "uid", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Data:       map[string]string{"index.html": "hello"},
	}
}

func TestDesire(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		desire       func(ctx context.Context, d *appsv1.Deployment) error
		wantChildren []string // kind/name, in order
		wantComplete bool
		wantErr      string
	}{
		"if children are desired, then the response carries them with their kind from the scheme": {
			desire: func(ctx context.Context, _ *appsv1.Deployment) error {
				return sidecar.Desire(ctx, configMap("web-content"), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}})
			},
			wantChildren: []string{"v1/ConfigMap/web-content", "v1/Service/web"},
		},
		"if the desired set is complete, then the response says so": {
			desire: func(ctx context.Context, _ *appsv1.Deployment) error {
				sidecar.DesiredComplete(ctx)
				return sidecar.Desire(ctx, configMap("web-content"))
			},
			wantChildren: []string{"v1/ConfigMap/web-content"},
			wantComplete: true,
		},
		"if nothing is desired and the set is complete, then every child is to be pruned": {
			desire: func(ctx context.Context, _ *appsv1.Deployment) error {
				sidecar.DesiredComplete(ctx)
				return nil
			},
			wantComplete: true,
		},
		"if a child is desired twice, then the last declaration wins, in the first one's place": {
			desire: func(ctx context.Context, _ *appsv1.Deployment) error {
				first := configMap("a")
				first.Data["index.html"] = "old"
				return sidecar.Desire(ctx, first, configMap("b"), configMap("a"))
			},
			wantChildren: []string{"v1/ConfigMap/a", "v1/ConfigMap/b"},
		},
		"if the reconcile fails, then the children are sent but never as complete": {
			desire: func(ctx context.Context, _ *appsv1.Deployment) error {
				sidecar.DesiredComplete(ctx)
				if err := sidecar.Desire(ctx, configMap("web-content")); err != nil {
					return err
				}
				return errors.New("the backend is down")
			},
			wantChildren: []string{"v1/ConfigMap/web-content"},
			wantErr:      "the backend is down",
		},
		"if a child is of a kind the controller does not own, then Desire fails": {
			desire: func(ctx context.Context, _ *appsv1.Deployment) error {
				return sidecar.Desire(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}})
			},
			wantErr: `does not own /v1, Kind=Secret: declare Owns(&Secret{})`,
		},
		"if a child has no name, then Desire fails": {
			desire: func(ctx context.Context, _ *appsv1.Deployment) error {
				return sidecar.Desire(ctx, &corev1.ConfigMap{})
			},
			wantErr: "has no name",
		},
		"if a child is in another namespace, then Desire fails": {
			desire: func(ctx context.Context, _ *appsv1.Deployment) error {
				cm := configMap("a")
				cm.Namespace = "elsewhere"
				return sidecar.Desire(ctx, cm)
			},
			wantErr: "cannot cross namespaces",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, _ := newWebsiteLike(t, tc.desire)
			res := h.Reconcile(t.Context(), "deployment", deployment(1))
			switch {
			case tc.wantErr == "" && res.Err != nil:
				t.Fatalf("unexpected error %q", res.Err.Message)
			case tc.wantErr != "" && (res.Err == nil || !strings.Contains(res.Err.Message, tc.wantErr)):
				t.Fatalf("error = %+v, want one containing %q", res.Err, tc.wantErr)
			}
			var got []string
			for _, u := range res.DesiredChildren() {
				got = append(got, u.GetAPIVersion()+"/"+u.GetKind()+"/"+u.GetName())
			}
			if strings.Join(got, ",") != strings.Join(tc.wantChildren, ",") {
				t.Errorf("desired children = %v, want %v", got, tc.wantChildren)
			}
			if res.ChildrenComplete() != tc.wantComplete {
				t.Errorf("children complete = %v, want %v", res.ChildrenComplete(), tc.wantComplete)
			}
		})
	}
}

func TestADesiredChildCarriesWhatTheControllerManagesOnly(t *testing.T) {
	t.Parallel()
	h, _ := newWebsiteLike(t, func(ctx context.Context, _ *appsv1.Deployment) error {
		return sidecar.Desire(ctx, configMap("web-content"), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
			Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}}},
		})
	})
	res := h.Reconcile(t.Context(), "deployment", deployment(1))
	var raw struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(res.Raw.GetDesiredChildren()[0], &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"resourceVersion", "uid", "managedFields", "creationTimestamp"} {
		if _, ok := raw.Metadata[f]; ok {
			t.Errorf("the desired child carries metadata.%s", f)
		}
	}
	var svc corev1.Service
	res.DesiredChild("Service", "web", &svc)
	if svc.Spec.Ports[0].Port != 80 || len(svc.Status.LoadBalancer.Ingress) != 0 || svc.Kind != "Service" {
		t.Errorf("desired service = %+v", svc)
	}
	var cm corev1.ConfigMap
	res.DesiredChild("ConfigMap", "web-content", &cm)
	if cm.Data["index.html"] != "hello" {
		t.Errorf("desired config map = %+v", cm)
	}
}

func TestObservedChildren(t *testing.T) {
	t.Parallel()
	h, r := newWebsiteLike(t, func(context.Context, *appsv1.Deployment) error { return nil })
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	res := h.Reconcile(t.Context(), "deployment", deployment(1), h.WithObservedChildren(configMap("a"), svc, configMap("b")))
	if res.Err != nil {
		t.Fatal(res.Err.Message)
	}
	if len(r.observed) != 2 || r.observed[0].Name != "a" || r.observed[1].Name != "b" || r.observed[0].Data["index.html"] != "hello" {
		t.Errorf("observed = %+v, want the two config maps", r.observed)
	}
	if r.observed[0].Kind != "ConfigMap" {
		t.Errorf("an observed child has no kind: %+v", r.observed[0].TypeMeta)
	}
}

func TestObservedChildrenNeedsSendObserved(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	var errSvc, errAll error
	var all []*unstructured.Unstructured
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
		Owns(&corev1.Service{}).Owns(&corev1.ConfigMap{}, sidecar.SendObserved()).
		Complete(sidecar.ReconcilerFunc[*appsv1.Deployment](func(ctx context.Context, _ *appsv1.Deployment) (sidecar.Result, error) {
			_, errSvc = sidecar.ObservedChildren[*corev1.Service](ctx)
			all, errAll = sidecar.ObservedChildren[*unstructured.Unstructured](ctx)
			return sidecar.Result{}, nil
		})); err != nil {
		t.Fatal(err)
	}
	h := sidecartest.New(t, srv)
	h.Reconcile(t.Context(), "deployment", deployment(1), h.WithObservedChildren(configMap("a")))
	if errSvc == nil || !strings.Contains(errSvc.Error(), "declare Owns(&Service{}, sidecar.SendObserved())") {
		t.Errorf("error = %v", errSvc)
	}
	if errAll != nil || len(all) != 1 || all[0].GetKind() != "ConfigMap" {
		t.Errorf("unstructured observed children = %v, %v", all, errAll)
	}
	if _, err := sidecar.ObservedChildren[*corev1.ConfigMap](t.Context()); err == nil {
		t.Error("ObservedChildren worked outside a reconcile")
	}
	if err := sidecar.Desire(t.Context(), configMap("a")); err == nil {
		t.Error("Desire worked outside a reconcile")
	}
	sidecar.DesiredComplete(t.Context()) // does nothing, and does not panic
}

func TestTheDescribedChildrenReachTheWire(t *testing.T) {
	t.Parallel()
	// A request carrying children crosses the wire with them.
	h, _ := newWebsiteLike(t, func(context.Context, *appsv1.Deployment) error { return nil })
	req := h.NewRequest("deployment", deployment(1), h.WithObservedChildren(configMap("a")))
	if len(req.GetObservedChildren()) != 1 {
		t.Fatalf("children = %d", len(req.GetObservedChildren()))
	}
	resp, err := h.Call(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetChildrenComplete() || len(resp.GetDesiredChildren()) != 0 {
		t.Errorf("response = %v", resp)
	}
}
