package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// skipFlow is a Reconciler of ConfigMaps owning Secrets, as newFlow builds it,
// named name, skipping unchanged inputs when skip. The sidecar answers
// *resp; its Reconcile calls are counted by sc.
func skipFlow(t *testing.T, name string, skip, sendObserved bool, resp **polyopv1alpha1.ReconcileResponse, objs ...client.Object) (*Reconciler, client.Client, *fakesidecar.Fake) {
	t.Helper()
	sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse { return *resp })}
	r, c, _ := newFlow(t, "", sc, objs...)
	r.Controller.Name = name
	r.Controller.SkipUnchangedInputs = skip
	r.Children[0].SendObserved = sendObserved
	return r, c, sc
}

// update changes the object key of kind gvk with change, as another client
// (or the host's own status write) would.
func update(t *testing.T, c client.Client, key client.ObjectKey, o *object.Object, change func(u *unstructured.Unstructured)) {
	t.Helper()
	gvk := o.GroupVersionKind()
	if err := c.Get(context.Background(), key, o); err != nil {
		t.Fatal(err)
	}
	o.SetGroupVersionKind(gvk)
	u, err := o.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	change(u)
	if err := c.Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

func TestSkipUnchangedInputsIsOffByDefault(t *testing.T) {
	t.Parallel()
	resp := &polyopv1alpha1.ReconcileResponse{}
	r, _, sc := skipFlow(t, "skip-off", false, true, &resp, ownerMap())
	for range 3 {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(sc.Reconciles()); n != 3 {
		t.Errorf("the sidecar was called %d times for 3 reconciles, want 3", n)
	}
}

func TestSkipUnchangedInputsSkipsTheEventsOfTheHostsOwnWrites(t *testing.T) {
	t.Parallel()
	const name = "skip-own-writes"
	resp := &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("a", "MQ==")}, ChildrenComplete: true}
	// Children not sent to the sidecar are not inputs.
	r, c, sc := skipFlow(t, name, true, false, &resp, ownerMap())
	ctx := context.Background()
	run := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	skipped := func() float64 { return testutil.ToFloat64(callsSkipped.WithLabelValues(name)) }

	run() // the first reconcile always calls; it applies child a
	if n := len(sc.Reconciles()); n != 1 {
		t.Fatalf("the first reconcile made %d calls, want 1", n)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "a"}, object.New(secretGVK)); err != nil {
		t.Fatalf("child a was not applied: %v", err)
	}
	run() // the child's event
	update(t, c, req.NamespacedName, object.New(configMapGVK), func(u *unstructured.Unstructured) {
		u.Object["status"] = map[string]any{"ready": true}
	})
	run() // the status write's event: a new resourceVersion and status only
	if n := len(sc.Reconciles()); n != 1 {
		t.Errorf("the sidecar was called %d times, want 1: the events of the host's own writes must not call it", n)
	}
	if got := skipped(); got != 2 {
		t.Errorf("polyop_sidecar_calls_skipped_total = %v, want 2", got)
	}
}

func TestSkipUnchangedInputsAlwaysCallsWhenAnInputChanges(t *testing.T) {
	t.Parallel()
	child := func() *object.Object {
		s := object.New(secretGVK)
		s.SetNamespace("ns")
		s.SetName("a")
		return s
	}
	for what, change := range map[string]func(t *testing.T, c client.Client){
		"a data (spec) change": func(t *testing.T, c client.Client) {
			update(t, c, req.NamespacedName, object.New(configMapGVK), func(u *unstructured.Unstructured) {
				u.Object["data"] = map[string]any{"k": "v"}
			})
		},
		"a label": func(t *testing.T, c client.Client) {
			update(t, c, req.NamespacedName, object.New(configMapGVK), func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"l": "1"}) })
		},
		"an annotation": func(t *testing.T, c client.Client) {
			update(t, c, req.NamespacedName, object.New(configMapGVK), func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"a": "1"}) })
		},
		"a finalizer": func(t *testing.T, c client.Client) {
			update(t, c, req.NamespacedName, object.New(configMapGVK), func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"example.com/other"}) })
		},
		"an observed child's content": func(t *testing.T, c client.Client) {
			update(t, c, client.ObjectKey{Namespace: "ns", Name: "a"}, child(), func(u *unstructured.Unstructured) {
				u.SetLabels(map[string]string{"l": "1"})
			})
		},
		"an observed child's status": func(t *testing.T, c client.Client) {
			update(t, c, client.ObjectKey{Namespace: "ns", Name: "a"}, child(), func(u *unstructured.Unstructured) {
				u.Object["status"] = map[string]any{"seen": true}
			})
		},
		"an observed child deleted": func(t *testing.T, c client.Client) {
			if err := c.Delete(context.Background(), child()); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			resp := &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("a", "MQ==")}}
			r, c, sc := skipFlow(t, "skip-changes", true, true, &resp, ownerMap())
			ctx := context.Background()
			// Two reconciles: the first applies the child, which changes the
			// observed children, so the second calls too; a third is skipped.
			for range 3 {
				if _, err := r.Reconcile(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(sc.Reconciles()); n != 2 {
				t.Fatalf("before the change the sidecar was called %d times, want 2 (the third reconcile skipped)", n)
			}
			change(t, c)
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			if n := len(sc.Reconciles()); n != 3 {
				t.Errorf("after %s the sidecar was called %d times in all, want 3", what, n)
			}
		})
	}
}

func TestSkipUnchangedInputsNeverSkipsAnObjectBeingDeleted(t *testing.T) {
	t.Parallel()
	resp := &polyopv1alpha1.ReconcileResponse{}
	owner := ownerMap()
	owner.Finalizers = []string{"example.com/other"} // keeps it while deleting
	r, c, sc := skipFlow(t, "skip-deleting", true, true, &resp, owner)
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	cm := object.New(configMapGVK)
	cm.SetNamespace("ns")
	cm.SetName("o")
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(sc.Reconciles()); n != 3 {
		t.Errorf("the sidecar was called %d times, want 3: the deletion and every reconcile of an object being deleted call it", n)
	}
}

func TestSkipUnchangedInputsCallsAfterAnErrorOrARequeueAfter(t *testing.T) {
	t.Parallel()
	for what, answer := range map[string]*polyopv1alpha1.ReconcileResponse{
		"an error":         {Error: &polyopv1alpha1.Failure{Message: "not yet"}},
		"a terminal error": {Error: &polyopv1alpha1.Failure{Message: "never", Terminal: true}},
		"a requeue_after":  {RequeueAfter: durationpb.New(time.Minute)},
	} {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			resp := &polyopv1alpha1.ReconcileResponse{}
			r, _, sc := skipFlow(t, "skip-after-failure", true, true, &resp, ownerMap())
			ctx := context.Background()
			_, _ = r.Reconcile(ctx, req) // a success, recorded
			resp = answer
			_, _ = r.Reconcile(ctx, req) // skipped: the inputs are unchanged
			if n := len(sc.Reconciles()); n != 1 {
				t.Fatalf("the sidecar was called %d times, want 1", n)
			}
			r.answered.forget(req.NamespacedName) // as if the inputs had changed
			_, _ = r.Reconcile(ctx, req)          // answers with the failure or requeue
			resp = &polyopv1alpha1.ReconcileResponse{}
			_, _ = r.Reconcile(ctx, req) // unchanged inputs, but after that answer: calls
			_, _ = r.Reconcile(ctx, req) // after a success again: skipped
			if n := len(sc.Reconciles()); n != 3 {
				t.Errorf("the sidecar was called %d times, want 3: after %s the next reconcile calls", n, what)
			}
		})
	}
}

func TestSkipUnchangedInputsCallsWhenAChildNotSentIsNoLongerAsApplied(t *testing.T) {
	t.Parallel()
	secret := func() *object.Object {
		s := object.New(secretGVK)
		s.SetNamespace("ns")
		s.SetName("a")
		return s
	}
	for what, change := range map[string]func(t *testing.T, c client.Client){
		"deleted": func(t *testing.T, c client.Client) {
			if err := c.Delete(context.Background(), secret()); err != nil {
				t.Fatal(err)
			}
		},
		"changed": func(t *testing.T, c client.Client) {
			update(t, c, client.ObjectKey{Namespace: "ns", Name: "a"}, secret(), func(u *unstructured.Unstructured) {
				u.Object["data"] = map[string]any{"v": "dGFtcGVyZWQ="}
			})
		},
	} {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			resp := &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("a", "MQ==")}, ChildrenComplete: true}
			r, c, sc := skipFlow(t, "skip-children-as-left", true, false, &resp, ownerMap())
			ctx := context.Background()
			for range 2 {
				if _, err := r.Reconcile(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(sc.Reconciles()); n != 1 {
				t.Fatalf("the sidecar was called %d times, want 1 (the second reconcile skipped)", n)
			}
			change(t, c)
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			if n := len(sc.Reconciles()); n != 2 {
				t.Errorf("after the child was %s the sidecar was called %d times in all, want 2", what, n)
			}
			s := secret()
			if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "a"}, s); err != nil {
				t.Fatalf("the child was not applied again: %v", err)
			}
			if v, _ := s.Field("data"); string(v) != `{"v":"MQ=="}` {
				t.Errorf("the child's data is %s, want it applied again", v)
			}
		})
	}
}
