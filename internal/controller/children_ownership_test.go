package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// controlledBy is a Secret ns/name whose controller is the Widget ownerName
// (by uid); no controller when uid is empty.
func controlledBy(name, ownerName, uid string, labels map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-of-" + name), Labels: labels},
		Data:       map[string][]byte{"v": []byte("mine")},
	}
	if uid != "" {
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "e2e.polyop.dev/v1", Kind: "Widget", Name: ownerName, UID: types.UID(uid), Controller: ptr.To(true)}}
	}
	return s
}

func TestClaim(t *testing.T) {
	t.Parallel()
	id := childID{gvk: secretGVK, namespace: "ns", name: "s"}
	for name, tc := range map[string]struct {
		existing client.Object
		adopt    bool
		want     string // the reason; "" for no refusal
		says     []string
	}{
		"if no object has the child's name, then it may be applied": {},
		"if the owner controls the object, then it may be applied": {
			existing: controlledBy("s", "w", "owner-uid", nil),
		},
		"if another object controls it, then it is refused, naming the child and that controller": {
			existing: controlledBy("s", "other", "other-uid", nil),
			want:     reasonChildOwnedByAnother,
			says:     []string{"Secret ns/s", "Widget/other", "other-uid", "Widget/w", "another name"},
		},
		"if another object controls it, then it is refused even when the kind declares adoption": {
			existing: controlledBy("s", "other", "other-uid", nil),
			adopt:    true,
			want:     reasonChildOwnedByAnother,
		},
		"if an earlier object of the owner's kind and name controls it, then it is refused, saying that owner is gone and how to delete the child": {
			existing: controlledBy("s", "w", "earlier-uid", nil),
			want:     reasonChildOwnedByAnother,
			says: []string{"Secret ns/s is controlled by an earlier Widget/w (uid earlier-uid), not by this one (uid owner-uid)",
				"the child's owner no longer exists", "garbage collector deletes such a child", "kubectl delete secret s -n ns"},
		},
		"if an object of the owner's name but another group controls it, then it is another object": {
			existing: func() client.Object {
				s := controlledBy("s", "w", "other-uid", nil)
				s.OwnerReferences[0].APIVersion = "other.example.com/v1"
				return s
			}(),
			want: reasonChildOwnedByAnother,
			says: []string{"controlled by Widget/w (uid other-uid), not by Widget/w", "another name"},
		},
		"if no object controls it, then it is refused, naming adoption as the remedy": {
			existing: controlledBy("s", "", "", nil),
			want:     reasonChildNotOwned,
			says:     []string{"Secret ns/s", "declare adopt for Secret"},
		},
		"if no object controls it and the kind declares adoption, then it may be applied": {
			existing: controlledBy("s", "", "", nil),
			adopt:    true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := claim(id, tc.existing, owner(), ChildKind{GVK: secretGVK, Namespaced: true, Adopt: tc.adopt})
			switch {
			case tc.want == "" && p != nil:
				t.Fatalf("refused (%s): %v", p.reason, p.err)
			case tc.want == "":
				return
			case p == nil:
				t.Fatalf("not refused, want %s", tc.want)
			case p.reason != tc.want:
				t.Errorf("reason %s, want %s", p.reason, tc.want)
			}
			for _, s := range tc.says {
				if !strings.Contains(p.err.Error(), s) {
					t.Errorf("%q does not say %q", p.err, s)
				}
			}
		})
	}
}

func TestKubectlDelete(t *testing.T) {
	t.Parallel()
	for id, want := range map[childID]string{
		{gvk: secretGVK, namespace: "ns", name: "s"}: "kubectl delete secret s -n ns",
		{gvk: roleGVK, name: "r"}:                    "kubectl delete clusterrole.rbac.authorization.k8s.io r",
		{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, namespace: "default", name: "d"}: "kubectl delete deployment.apps d -n default",
	} {
		if got := kubectlDelete(id); got != want {
			t.Errorf("kubectlDelete(%s) = %q, want %q", id, got, want)
		}
	}
}

// A child left by an earlier owner of the same name (deleted, then created
// again) is not written, and the Warning event on the owner and the
// reconcile's error say that its owner is gone and how to delete it.
func TestReconcileRefusesTheChildOfAnEarlierOwnerOfTheSameName(t *testing.T) {
	t.Parallel()
	earlier := controlledBy("s", "o", "earlier-uid", nil)
	earlier.OwnerReferences[0].APIVersion, earlier.OwnerReferences[0].Kind = "v1", "ConfigMap"
	resp := &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("s", "MQ==")}, ChildrenComplete: true}
	sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse { return resp })}
	r, c, w := newFlow(t, "", sc, ownerMap(), earlier)
	rec := events.NewFakeRecorder(10)
	r.Recorder = rec

	_, err := r.Reconcile(t.Context(), req)
	says := []string{
		"desired child Secret ns/s is controlled by an earlier ConfigMap/o (uid earlier-uid), not by this one (uid owner-uid)",
		"the child's owner no longer exists",
		"the local API server of polyop run has no garbage collector), delete it: kubectl delete secret s -n ns",
	}
	for _, want := range says {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("reconcile: %v, want it to say %q", err, want)
		}
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Warning "+reasonChildOwnedByAnother+" ") || !strings.Contains(e, says[0]) || !strings.Contains(e, says[2]) {
			t.Errorf("event %q, want a Warning %s saying %q and %q", e, reasonChildOwnedByAnother, says[0], says[2])
		}
	default:
		t.Error("no event recorded")
	}
	if got := w.take(); len(got) != 0 {
		t.Errorf("writes %v, want none", got)
	}
	s := object.New(secretGVK)
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "s"}, s); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != "earlier-uid" {
		t.Errorf("the child's controller is now %v, want the earlier owner's", s.OwnerReferences)
	}
}

func TestImmutableFields(t *testing.T) {
	t.Parallel()
	job := schema.GroupKind{Group: "batch", Kind: "Job"}
	for name, tc := range map[string]struct {
		err  error
		want []string
	}{
		"if a Job's template changes, then spec.template": {
			err:  apierrors.NewInvalid(job, "j", field.ErrorList{field.Invalid(field.NewPath("spec", "template"), "…", "field is immutable")}),
			want: []string{"spec.template"},
		},
		"if a Pod's spec changes, then spec": {
			err: apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.Forbidden(field.NewPath("spec"),
				"pod updates may not change fields other than `spec.containers[*].image`")}),
			want: []string{"spec"},
		},
		"if a validation rule says so, then its field": {
			err:  apierrors.NewInvalid(job, "j", field.ErrorList{field.Invalid(field.NewPath("spec", "x"), "a", "Value is immutable"), field.Required(field.NewPath("spec", "y"), "")}),
			want: []string{"spec.x"},
		},
		"if the error is another invalid value, then none": {
			err: apierrors.NewInvalid(job, "j", field.ErrorList{field.Required(field.NewPath("spec", "y"), "")}),
		},
		"if the error is not Invalid, then none": {
			err: apierrors.NewConflict(schema.GroupResource{Resource: "jobs"}, "j", fmt.Errorf("field is immutable")),
		},
		"if the error is wrapped, then it is read through": {
			err:  fmt.Errorf("applying: %w", apierrors.NewInvalid(job, "j", field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), "", "field is immutable")})),
			want: []string{"spec.selector"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := immutableFields(tc.err); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("immutableFields = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAppliedByHost(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		labels  map[string]string
		manager []metav1.ManagedFieldsEntry
		want    bool
	}{
		"if the child carries the controller's label, then the host applied it": {
			labels: map[string]string{ControllerLabel: "widget"}, want: true,
		},
		"if the label names another controller, then not": {
			labels: map[string]string{ControllerLabel: "other"},
		},
		"if it carries no label and no managedFields, then not": {},
		"if the controller's field manager applied it, then the host did": {
			manager: []metav1.ManagedFieldsEntry{{Manager: "polyop/widget", Operation: metav1.ManagedFieldsOperationApply}}, want: true,
		},
		"if the controller's field manager only updated it, then not": {
			manager: []metav1.ManagedFieldsEntry{{Manager: "polyop/widget", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := controlledBy("s", "w", "owner-uid", tc.labels)
			s.ManagedFields = tc.manager
			if got := appliedByHost(s, "widget", "polyop/widget"); got != tc.want {
				t.Errorf("appliedByHost = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidateChildrenSetsTheControllerLabel(t *testing.T) {
	t.Parallel()
	got, err := validateChildren([][]byte{[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"mine":"x","polyop.dev/controller":"forged"}}}`)},
		owner(), "widget", []ChildKind{{GVK: configMapGVK, Namespaced: true}})
	if err != nil {
		t.Fatal(err)
	}
	if l := objectOf(t, got[0]).GetLabels(); l["mine"] != "x" || l[ControllerLabel] != "widget" {
		t.Errorf("labels %v, want the child's own and %s=widget", l, ControllerLabel)
	}
	_, err = validateChildren([][]byte{[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"n":1}}}`)},
		owner(), "widget", []ChildKind{{GVK: configMapGVK, Namespaced: true}})
	if err == nil || !strings.Contains(err.Error(), "metadata.labels") {
		t.Errorf("labels that are not strings: %v, want an error naming metadata.labels", err)
	}
}

func TestReconcileNeverWritesAnObjectItDoesNotControlAndPrunesOnlyWhatItApplied(t *testing.T) {
	t.Parallel()
	var resp *polyopv1alpha1.ReconcileResponse
	sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse { return resp })}
	r, c, w := newFlow(t, "", sc, ownerMap(),
		controlledBy("theirs", "other", "other-uid", nil),
		controlledBy("loose", "", "", nil),
		controlledBy("byhand", "o", "owner-uid", nil),
	)
	ctx := context.Background()
	read := func(name string) *object.Object {
		t.Helper()
		s := object.New(secretGVK)
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	// Another object's child, and one nobody controls, are refused; the
	// child beside them is applied.
	resp = &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("theirs", "MQ=="), secretChild("loose", "MQ=="), secretChild("new", "MQ==")}, ChildrenComplete: true}
	_, err := r.Reconcile(ctx, req)
	if err == nil || !strings.Contains(err.Error(), "Secret ns/theirs is controlled by Widget/other") || !strings.Contains(err.Error(), "Secret ns/loose already exists and no object controls it") {
		t.Errorf("reconcile: %v, want both refusals", err)
	}
	if got := w.take(); got["apply"] != 1 || len(got) != 1 {
		t.Errorf("writes %v, want the one apply of the new child", got)
	}
	if s := read("theirs"); metav1.GetControllerOf(s).UID != "other-uid" {
		t.Errorf("the other object's child changed controller: %v", s.OwnerReferences)
	}
	if s := read("loose"); len(s.OwnerReferences) != 0 || len(s.Labels) != 0 {
		t.Errorf("the loose object was written: %v, %v", s.OwnerReferences, s.Labels)
	}
	if s := read("new"); s.Labels[ControllerLabel] != "maps" {
		t.Errorf("the new child has labels %v, want %s=maps", s.Labels, ControllerLabel)
	}

	// With adoption declared, the loose object is adopted.
	r.Children[0].Adopt = true
	resp = &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("loose", "MQ=="), secretChild("new", "MQ==")}, ChildrenComplete: true}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if s := read("loose"); metav1.GetControllerOf(s) == nil || metav1.GetControllerOf(s).UID != "owner-uid" || s.Labels[ControllerLabel] != "maps" {
		t.Errorf("the loose object was not adopted: %v, %v", s.OwnerReferences, s.Labels)
	}
	w.take()

	// Nothing desired: what the host applied is pruned, adopted or not; the
	// child made by hand stays.
	resp = &polyopv1alpha1.ReconcileResponse{ChildrenComplete: true}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); got["delete loose"] != 1 || got["delete new"] != 1 || len(got) != 2 {
		t.Errorf("writes %v, want loose and new deleted and nothing else", got)
	}
	if s := read("byhand"); string(s.UID) == "" {
		t.Errorf("the child made by hand is gone")
	}
}

func TestReconcileReportsOrReplacesAChildRefusedOnAnImmutableField(t *testing.T) {
	t.Parallel()
	for name, replace := range map[string]bool{
		"if the kind does not declare replacement, then the child is left and the field named": false,
		"if the kind declares replacement, then the child is deleted and applied again":        true,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resp := &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("s", "MQ==")}, ChildrenComplete: true}
			sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse { return resp })}
			r, c, w := newFlow(t, "", sc, ownerMap())
			ctx := context.Background()
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			w.take()

			// The API server refuses the next apply over the existing child
			// (newFlow's client counts the writes that go through).
			refuse := true
			r.Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
				Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
					if refuse {
						refuse = false
						w.add("apply")
						return apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "s", field.ErrorList{field.Invalid(field.NewPath("type"), "x", "field is immutable")})
					}
					return c.Apply(ctx, obj, opts...)
				},
			})
			r.Children[0].ReplaceOnImmutable = replace
			resp = &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("s", "Mg==")}, ChildrenComplete: true}
			_, err := r.Reconcile(ctx, req)
			got := w.take()
			if !replace {
				if err == nil || !strings.Contains(err.Error(), "refuses to change type, which is immutable") || !strings.Contains(err.Error(), "replace_on_immutable") {
					t.Errorf("reconcile: %v, want an error naming the field and the remedy", err)
				}
				if got["apply"] != 1 || len(got) != 1 {
					t.Errorf("writes %v, want the one refused apply", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got["apply"] != 2 || got["delete s"] != 1 || len(got) != 2 {
				t.Errorf("writes %v, want the refused apply, the delete and the apply again", got)
			}
			s := object.New(secretGVK)
			if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "s"}, s); err != nil {
				t.Fatal(err)
			}
			if data, _ := s.DecodeField("data"); fmt.Sprint(data) != "map[v:Mg==]" {
				t.Errorf("the child has data %v after the replacement", data)
			}
		})
	}
}

// With sharding on, each child carries its controller's shard label, whatever
// the sidecar set, and a child whose owner moved hashes differently, so that
// it is applied again with its new label.
func TestValidateLabelledChildrenSetsTheExtraLabelsBeforeHashing(t *testing.T) {
	t.Parallel()
	raw := [][]byte{[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"mine":"x","shard.sharding.polyop.dev/w":"forged"}}}`)}
	kinds := []ChildKind{{GVK: configMapGVK, Namespaced: true}}
	a, err := validateLabelledChildren(raw, owner(), "widget", kinds, map[string]string{"shard.sharding.polyop.dev/w": "host-a"})
	if err != nil {
		t.Fatal(err)
	}
	if l := objectOf(t, a[0]).GetLabels(); l["mine"] != "x" || l[ControllerLabel] != "widget" || l["shard.sharding.polyop.dev/w"] != "host-a" {
		t.Errorf("labels %v, want the child's own, %s=widget and the shard label host-a", l, ControllerLabel)
	}
	b, err := validateLabelledChildren(raw, owner(), "widget", kinds, map[string]string{"shard.sharding.polyop.dev/w": "host-b"})
	if err != nil {
		t.Fatal(err)
	}
	if a[0].hash == b[0].hash {
		t.Error("a child of an owner that moved to another replica hashes as before: it would not be applied with its new shard label")
	}
}

func TestLabelUpdatesPassTheUpdateFilters(t *testing.T) {
	t.Parallel()
	preds := withLabelUpdates(updateFilterPredicates([]polyopv1alpha1.UpdateFilter{polyopv1alpha1.UpdateFilter_UPDATE_FILTER_GENERATION_CHANGED}), []string{"drain"})
	old := owner()
	drained := owner()
	drained.SetLabels(map[string]string{"drain": "true"})
	other := owner()
	other.SetLabels(map[string]string{"unrelated": "x"})
	if !preds[0].Update(event.UpdateEvent{ObjectOld: old, ObjectNew: drained}) {
		t.Error("a drain label added did not pass a generation filter")
	}
	if preds[0].Update(event.UpdateEvent{ObjectOld: old, ObjectNew: other}) {
		t.Error("another label's change passed a generation filter")
	}
	if got := withLabelUpdates(nil, []string{"drain"}); got != nil {
		t.Errorf("without update filters: %v, want none", got)
	}
}
