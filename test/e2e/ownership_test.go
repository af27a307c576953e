package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// This file tests the host's ownership rules for desired children: another
// object's child is never taken over, an object nobody controls is adopted
// only when the owned kind declares it, prune deletes only what the host
// applied, and a child refused on an immutable field is reported, or
// replaced when the owned kind declares it.

// controllerLabel is the label the host sets on every child it applies.
const controllerLabel = "polyop.dev/controller"

func TestAChildThatAnotherOwnerControlsIsRefusedWithoutALoop(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar()
	f.startHost()

	f.createWidget("a", map[string]any{"configMaps": []any{"shared"}, "value": "from-a"})
	// a's status lists the children the host's cache holds: once it names
	// the child, b's reconciles find it there.
	testenv.Eventually(f.t, 30*time.Second, "a's child exists and the host's cache holds it", func() (bool, string) {
		u := f.getWidget("a")
		return statusList(u, "configMaps") == "shared", statusList(u, "configMaps")
	})
	a := f.getWidget("a")
	before := f.configMap("shared")
	if before.Data["value"] != "from-a" {
		t.Fatalf("a's child has data %v", before.Data)
	}

	f.createWidget("b", map[string]any{"configMaps": []any{"shared"}, "value": "from-b"})
	event := f.waitEvent("b", "ChildOwnedByAnother", func() string {
		cm := f.configMap("shared")
		return fmt.Sprintf("%d reconciles of a and %d of b; the child is at resourceVersion %s (it was %s), value %q",
			len(f.widgetCalls("a", "Reconcile")), len(f.widgetCalls("b", "Reconcile")), cm.ResourceVersion, before.ResourceVersion, cm.Data["value"])
	})
	for _, want := range []string{"ConfigMap " + f.ns + "/shared", "Widget/a", string(a.GetUID())} {
		if !strings.Contains(event.Note, want) {
			t.Errorf("the event on b says %q, want it to name %q", event.Note, want)
		}
	}
	atEvent := f.configMap("shared")
	callsOfA := len(f.widgetCalls("a", "Reconcile"))

	// b's reconcile fails and backs off: its retry count grows. By the time
	// it has been retried eight times (about 1.3 s of exponential backoff),
	// nothing has written the child, so a was not reconciled again either.
	const retries = 8
	var callsOfB int
	testenv.Eventually(f.t, 60*time.Second, "b's reconcile is retried with backoff", func() (bool, string) {
		calls := f.widgetCalls("b", "Reconcile")
		callsOfB = len(calls)
		if callsOfB == 0 {
			return false, "no calls"
		}
		return calls[callsOfB-1].Retries >= retries, fmt.Sprintf("%d calls, the last %+v", callsOfB, calls[callsOfB-1])
	})
	after := f.configMap("shared")
	t.Logf("a: %d reconciles; b: %d reconciles to reach %d retries; the child at resourceVersion %s before b, %s after",
		len(f.widgetCalls("a", "Reconcile")), callsOfB, retries, before.ResourceVersion, after.ResourceVersion)
	if after.ResourceVersion != before.ResourceVersion || atEvent.ResourceVersion != before.ResourceVersion {
		t.Errorf("the child was written: resourceVersion %s before b, %s at b's event, %s after %d retries",
			before.ResourceVersion, atEvent.ResourceVersion, after.ResourceVersion, retries)
	}
	if after.Data["value"] != "from-a" {
		t.Errorf("the child's data is %v, want a's", after.Data)
	}
	if ref := metav1.GetControllerOf(after); ref == nil || ref.UID != a.GetUID() || len(after.OwnerReferences) != 1 {
		t.Errorf("the child has owner references %+v, want a (%s) alone as its controller", after.OwnerReferences, a.GetUID())
	}
	// Each of b's reconciles fails, so each is one backoff step: b is
	// reconciled once more than its retry count, give or take the one that
	// is running.
	if callsOfB > retries+3 {
		t.Errorf("b was reconciled %d times to reach %d retries, want at most %d", callsOfB, retries, retries+3)
	}
	// a's own writes (finalizer, child, status) bring it a few reconciles; a
	// child flipping between a and b would bring it one per flip.
	if got := len(f.widgetCalls("a", "Reconcile")); got > 8 {
		t.Errorf("a was reconciled %d times (%d when b's event came), want at most 8", got, callsOfA)
	}
}

func TestAnObjectNobodyControlsIsRefusedAndNeverPruned(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar()
	f.startHost()

	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "handmade"}, Data: map[string]string{"value": "mine"}})
	f.createWidget("w", map[string]any{"configMaps": []any{"handmade", "own"}, "value": "theirs"})
	event := f.waitEvent("w", "ChildNotOwned", func() string { return fmt.Sprint(f.configMap("handmade")) })
	if !strings.Contains(event.Note, "ConfigMap "+f.ns+"/handmade") || !strings.Contains(event.Note, "adopt") {
		t.Errorf("the event says %q, want it to name the ConfigMap and adoption", event.Note)
	}
	testenv.Eventually(f.t, 30*time.Second, "w's reconcile is retried", func() (bool, string) {
		calls := f.widgetCalls("w", "Reconcile")
		return len(calls) > 0 && calls[len(calls)-1].Retries >= 3, fmt.Sprintf("%d calls", len(calls))
	})
	checkUntouched(t, f.configMap("handmade"))
	if f.configMap("own") == nil {
		t.Errorf("the child beside the refused one was not applied")
	}

	// A complete answer without it prunes w's own child, and leaves the
	// ConfigMap w never controlled.
	f.setSpec("w", map[string]any{"configMaps": []any{}, "value": "theirs"})
	testenv.Eventually(f.t, 30*time.Second, "w's own child is pruned", func() (bool, string) {
		return f.configMap("own") == nil, "it exists"
	})
	checkUntouched(t, f.configMap("handmade"))
}

// checkUntouched checks that the hand-made ConfigMap is as its maker left it.
func checkUntouched(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	if cm == nil {
		t.Fatal("the hand-made ConfigMap was deleted")
	}
	if cm.Data["value"] != "mine" || len(cm.OwnerReferences) > 0 || cm.Labels[controllerLabel] != "" {
		t.Errorf("the hand-made ConfigMap was changed: data %v, owner references %v, labels %v", cm.Data, cm.OwnerReferences, cm.Labels)
	}
}

func TestAnObjectNobodyControlsIsAdoptedAndPrunedWhenTheKindDeclaresAdoption(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar("--adopt-configmaps")
	f.startHost()

	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "handmade"}, Data: map[string]string{"value": "mine", "other": "kept"}})
	w := f.createWidget("w", map[string]any{"configMaps": []any{"handmade"}, "value": "theirs"})
	testenv.Eventually(f.t, 30*time.Second, "the ConfigMap is adopted", func() (bool, string) {
		cm := f.configMap("handmade")
		return cm.Data["value"] == "theirs" && len(cm.OwnerReferences) == 1, fmt.Sprintf("data %v, owner references %v", cm.Data, cm.OwnerReferences)
	})
	cm := f.configMap("handmade")
	checkControllerRef(t, "ConfigMap handmade", cm.OwnerReferences, w.GetUID())
	if cm.Data["other"] != "kept" || cm.Labels[controllerLabel] != "widget" {
		t.Errorf("adopted ConfigMap: data %v, labels %v; want the other key kept and the label %s=widget", cm.Data, cm.Labels, controllerLabel)
	}

	f.setSpec("w", map[string]any{"configMaps": []any{}, "value": "theirs"})
	testenv.Eventually(f.t, 30*time.Second, "the adopted ConfigMap is pruned like any child", func() (bool, string) {
		return f.configMap("handmade") == nil, "it exists"
	})
}

func TestPruneLeavesAChildTheHostDidNotApply(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar()
	f.startHost()

	f.createWidget("w", map[string]any{"configMaps": []any{"applied"}, "value": "v"})
	testenv.Eventually(f.t, 30*time.Second, "the child exists", func() (bool, string) {
		return f.configMap("applied") != nil, "it does not"
	})
	w := f.getWidget("w")
	if got := f.configMap("applied").Labels[controllerLabel]; got != "widget" {
		t.Errorf("the applied child has label %s=%q, want widget", controllerLabel, got)
	}
	// Someone makes an object w's child by hand.
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "byhand", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "e2e.polyop.dev/v1", Kind: "Widget", Name: "w", UID: w.GetUID(), Controller: ptr.To(true),
	}}}, Data: map[string]string{"value": "mine"}})
	testenv.Eventually(f.t, 30*time.Second, "w observes the hand-made child", func() (bool, string) {
		calls := f.widgetCalls("w", "Reconcile")
		return slices.ContainsFunc(calls, func(c widgetCall) bool { return slices.Contains(c.Children, "ConfigMap/byhand") }),
			fmt.Sprint(calls[len(calls)-1].Children)
	})
	if f.configMap("byhand") == nil {
		t.Fatal("the child made by hand was pruned while another child was desired")
	}

	f.setSpec("w", map[string]any{"configMaps": []any{}, "value": "v"})
	testenv.Eventually(f.t, 30*time.Second, "the applied child is pruned", func() (bool, string) {
		return f.configMap("applied") == nil, "it exists"
	})
	testenv.Eventually(f.t, 30*time.Second, "w observes the hand-made child alone", func() (bool, string) {
		calls := f.widgetCalls("w", "Reconcile")
		last := calls[len(calls)-1]
		return slices.Equal(last.Children, []string{"ConfigMap/byhand"}), fmt.Sprint(last.Children)
	})
	if cm := f.configMap("byhand"); cm == nil || cm.Data["value"] != "mine" {
		t.Errorf("the child made by hand was pruned or changed: %v", cm)
	}
}

func TestAChildRefusedOnAnImmutableFieldIsReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar("--own-jobs")
	f.startHost()

	f.createWidget("w", map[string]any{"jobs": []any{"j"}, "jobImage": "example.com/one:1"})
	first := f.waitJob("j", "example.com/one:1")

	f.setSpec("w", map[string]any{"jobs": []any{"j"}, "jobImage": "example.com/two:2"})
	event := f.waitEvent("w", "ChildFieldImmutable", func() string { return jobImage(f.job("j")) })
	for _, want := range []string{"Job " + f.ns + "/j", "spec.template", "replace_on_immutable"} {
		if !strings.Contains(event.Note, want) {
			t.Errorf("the event says %q, want it to name %q", event.Note, want)
		}
	}
	testenv.Eventually(f.t, 30*time.Second, "w's reconcile is retried", func() (bool, string) {
		calls := f.widgetCalls("w", "Reconcile")
		return len(calls) > 0 && calls[len(calls)-1].Retries >= 3, fmt.Sprintf("%d calls", len(calls))
	})
	if j := f.job("j"); j == nil || j.UID != first.UID || jobImage(j) != "example.com/one:1" {
		t.Errorf("the Job was changed: %v", j)
	}
}

func TestAChildRefusedOnAnImmutableFieldIsReplacedWhenTheKindDeclaresIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar("--replace-jobs")
	f.startHost()

	f.createWidget("w", map[string]any{"jobs": []any{"j"}, "jobImage": "example.com/one:1"})
	first := f.waitJob("j", "example.com/one:1")

	f.setSpec("w", map[string]any{"jobs": []any{"j"}, "jobImage": "example.com/two:2"})
	second := f.waitJob("j", "example.com/two:2")
	if second.UID == first.UID {
		t.Errorf("the Job was changed in place, not replaced")
	}
	w := f.getWidget("w")
	checkControllerRef(t, "Job j", second.OwnerReferences, w.GetUID())
	f.waitEvent("w", "ChildReplaced", func() string { return "" })
}

// waitJob waits until Job name exists and runs image, and returns it.
func (f *fixture) waitJob(name, image string) *batchv1.Job {
	f.t.Helper()
	var j *batchv1.Job
	testenv.Eventually(f.t, 30*time.Second, fmt.Sprintf("Job %s runs %s", name, image), func() (bool, string) {
		j = f.job(name)
		return jobImage(j) == image, jobImage(j)
	})
	return j
}

// job reads a Job of the fixture's namespace; nil when it does not exist.
func (f *fixture) job(name string) *batchv1.Job {
	f.t.Helper()
	j := &batchv1.Job{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, j)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatalf("getting Job %s: %v", name, err)
	}
	return j
}

// jobImage is the image of a Job's first container; "" for none.
func jobImage(j *batchv1.Job) string {
	if j == nil || len(j.Spec.Template.Spec.Containers) == 0 {
		return ""
	}
	return j.Spec.Template.Spec.Containers[0].Image
}

// waitEvent waits for an event with reason on the Widget name and returns
// it; seen tells, on a timeout, what else was seen. Every reason but
// ChildReplaced is a Warning.
func (f *fixture) waitEvent(name, reason string, seen func() string) (found eventsv1.Event) {
	f.t.Helper()
	defer func() {
		if want := corev1.EventTypeWarning; reason != "ChildReplaced" && found.Type != want {
			f.t.Errorf("the %s event on %s is of type %q, want %s", reason, name, found.Type, want)
		}
	}()
	testenv.Eventually(f.t, 30*time.Second, fmt.Sprintf("a %s event on %s", reason, name), func() (bool, string) {
		found = eventsv1.Event{}
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				found = e
				return true, ""
			}
			if e.Regarding.Name == name {
				reasons = append(reasons, e.Type+" "+e.Reason+": "+e.Note)
			}
		}
		return false, fmt.Sprintf("events on %s: %q; %s", name, reasons, seen())
	})
	return found
}
