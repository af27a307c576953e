package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

func TestDesiredChildrenAreAppliedOwnedObservedAndPruned(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar()
	f.startHost()

	// Objects the controller does not own are never pruned: one without an
	// owner, one another controller owns.
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "bystander"}})
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "someone-elses", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "e2e.polyop.dev/v1", Kind: "Widget", Name: "other", UID: types.UID("5f0c2b7e-0000-4000-8000-000000000001"), Controller: ptr.To(true),
	}}}})

	f.createWidget("w", map[string]any{"configMaps": []any{"a", "b"}, "secrets": []any{"s"}, "value": "one"})
	testenv.Eventually(f.t, time.Minute, "the children exist and are observed", func() (bool, string) {
		u := f.getWidget("w")
		return statusList(u, "configMaps") == "a,b" && f.secret("s") != nil, fmt.Sprintf("status.configMaps %q", statusList(u, "configMaps"))
	})
	w := f.getWidget("w")

	for _, name := range []string{"a", "b"} {
		cm := f.configMap(name)
		if cm.Data["value"] != "one" || cm.Labels["e2e.polyop.dev/owner"] != "w" {
			t.Errorf("ConfigMap %s: data %v, labels %v; want value one and the owner label", name, cm.Data, cm.Labels)
		}
		checkControllerRef(t, "ConfigMap "+name, cm.OwnerReferences, w.GetUID())
		checkManager(t, "ConfigMap "+name, cm.ManagedFields, "polyop/widget")
	}
	s := f.secret("s")
	if string(s.Data["value"]) != "one" {
		t.Errorf("Secret s data %q, want one", s.Data["value"])
	}
	checkControllerRef(t, "Secret s", s.OwnerReferences, w.GetUID())

	// The observed children reach the sidecar: the ConfigMaps, declared with
	// send_observed, and not the Secrets.
	calls := f.widgetCalls("w", "Reconcile")
	if got := strings.Join(calls[len(calls)-1].Children, ","); got != "ConfigMap/a,ConfigMap/b" {
		t.Errorf("the last reconcile observed children %q, want ConfigMap/a,ConfigMap/b", got)
	}

	// A partial answer never prunes.
	seen := len(f.widgetCalls("w", "Reconcile"))
	u := f.setSpec("w", map[string]any{"configMaps": []any{"a"}, "value": "one", "partial": true})
	f.waitReconciled("w", u.GetGeneration(), seen)
	// The host writes the status after it has applied (and would have
	// pruned) the children of the same answer.
	testenv.Eventually(f.t, time.Minute, "the partial answer's status is written", func() (bool, string) {
		g, _, _ := unstructured.NestedInt64(f.getWidget("w").Object, "status", "observedGeneration")
		return g == u.GetGeneration(), fmt.Sprintf("observedGeneration %d", g)
	})
	if f.configMap("b") == nil || f.secret("s") == nil {
		t.Fatalf("a partial desired set pruned children")
	}

	// Nor does an answer that reports an error, even when it says complete.
	seen = len(f.widgetCalls("w", "Reconcile"))
	u = f.setSpec("w", map[string]any{"configMaps": []any{"a"}, "value": "one", "fail": "not now"})
	testenv.Eventually(f.t, time.Minute, "the failing reconcile is retried", func() (bool, string) {
		calls := f.widgetCalls("w", "Reconcile")
		last := calls[len(calls)-1]
		return len(calls) > seen && last.Generation == u.GetGeneration() && last.Retries >= 2, fmt.Sprintf("last %+v", last)
	})
	if f.configMap("b") == nil || f.secret("s") == nil {
		t.Fatalf("an answer reporting an error pruned children")
	}

	// A complete answer prunes what is no longer desired, of every owned
	// kind, and only that.
	f.setSpec("w", map[string]any{"configMaps": []any{"a"}, "value": "two"})
	testenv.Eventually(f.t, time.Minute, "b and s are pruned and a is updated", func() (bool, string) {
		a := f.configMap("a")
		return f.configMap("b") == nil && f.secret("s") == nil && a != nil && a.Data["value"] == "two",
			fmt.Sprintf("b exists: %v, s exists: %v, a: %v", f.configMap("b") != nil, f.secret("s") != nil, a)
	})
	if f.configMap("bystander") == nil || f.configMap("someone-elses") == nil {
		t.Errorf("pruning deleted a ConfigMap the controller does not own")
	}
	testenv.Eventually(f.t, time.Minute, "the status observes the pruned set", func() (bool, string) {
		u := f.getWidget("w")
		return statusList(u, "configMaps") == "a", statusList(u, "configMaps")
	})

	// Drift is repaired: a field the controller manages is set back.
	a := f.configMap("a")
	a.Data["value"] = "tampered"
	if err := k8s.Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(f.t, time.Minute, "the tampered child is repaired", func() (bool, string) {
		a := f.configMap("a")
		return a.Data["value"] == "two", fmt.Sprint(a.Data)
	})
}

func TestInvalidDesiredChildrenAreRefusedWholesale(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar()
	host := f.startHost()

	for how, want := range map[string]string{
		"not-json":        "desired_children[1]: not valid JSON",
		"wrong-kind":      "Service.v1 is not a kind the controller owns (it owns ConfigMap.v1, Secret.v1)",
		"no-name":         "desired_children[1]: ConfigMap has no metadata.name",
		"other-namespace": "a child lives in its owner's namespace",
	} {
		f.createWidget(how, map[string]any{"configMaps": []any{how + "-good"}, "value": "v", "badChild": how})
		if err := host.WaitForOutput(ctxTimeout(t, time.Minute), want); err != nil {
			t.Error(err)
		}
	}
	for how := range map[string]bool{"not-json": true, "wrong-kind": true, "no-name": true, "other-namespace": true} {
		testenv.Eventually(f.t, time.Minute, how+" is retried", func() (bool, string) {
			calls := f.widgetCalls(how, "Reconcile")
			return len(calls) >= 3, fmt.Sprintf("%d calls", len(calls))
		})
		if f.configMap(how+"-good") != nil {
			t.Errorf("%s: the valid child was applied beside an invalid one", how)
		}
		if u := f.getWidget(how); statusString(u, "phase") != "" {
			t.Errorf("%s: the status was written beside invalid children: %v", how, u.Object["status"])
		}
	}
	testenv.Eventually(f.t, time.Minute, "a Warning event names the problem", func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "wrong-kind" && e.Type == corev1.EventTypeWarning && e.Reason == "InvalidDesiredChildren" && strings.Contains(e.Note, "not a kind the controller owns") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})

	// Once the sidecar answers properly, the next reconcile repairs all.
	f.setSpec("wrong-kind", map[string]any{"configMaps": []any{"wrong-kind-good"}, "value": "v"})
	testenv.Eventually(f.t, time.Minute, "the fixed widget converges", func() (bool, string) {
		u := f.getWidget("wrong-kind")
		return f.configMap("wrong-kind-good") != nil && statusString(u, "phase") == "Ready", statusString(u, "phase")
	})
}

func checkControllerRef(t *testing.T, what string, refs []metav1.OwnerReference, uid types.UID) {
	t.Helper()
	if len(refs) != 1 {
		t.Errorf("%s has owner references %+v, want one", what, refs)
		return
	}
	r := refs[0]
	if r.APIVersion != "e2e.polyop.dev/v1" || r.Kind != "Widget" || r.Name != "w" || r.UID != uid ||
		!ptr.Deref(r.Controller, false) || !ptr.Deref(r.BlockOwnerDeletion, false) {
		t.Errorf("%s has owner reference %+v, want the controller reference of Widget w (%s)", what, r, uid)
	}
}

func checkManager(t *testing.T, what string, fields []metav1.ManagedFieldsEntry, manager string) {
	t.Helper()
	for _, f := range fields {
		if f.Manager == manager && f.Operation == metav1.ManagedFieldsOperationApply {
			return
		}
	}
	t.Errorf("%s is not applied by field manager %q: %+v", what, manager, fields)
}
