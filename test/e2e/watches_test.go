package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyop/polyop/internal/testenv"
)

func TestWatchesEnqueueTheObjectsTheyName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	metrics := freePort(t)
	f.startChildSidecar()
	f.startHost("--metrics-bind-address", metrics, "--metrics-secure=false")

	// field_path: spec.configMapName of two widgets points at "settings"; the
	// sidecar reads it through the cluster service into status.
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "settings"}, Data: map[string]string{"value": "v1"}})
	f.createWidget("first", map[string]any{"configMapName": "settings"})
	f.createWidget("second", map[string]any{"configMapName": "settings"})
	f.createWidget("unrelated", map[string]any{"configMapName": "other"})
	for _, name := range []string{"first", "second"} {
		testenv.Eventually(f.t, time.Minute, name+" reads the ConfigMap from the cache", func() (bool, string) {
			u := f.getWidget(name)
			return statusString(u, "configMapValue") == "v1" && statusString(u, "configMapSource") == "cache",
				fmt.Sprintf("value %q from %q", statusString(u, "configMapValue"), statusString(u, "configMapSource"))
		})
	}
	testenv.Eventually(f.t, time.Minute, "unrelated sees its ConfigMap missing", func() (bool, string) {
		u := f.getWidget("unrelated")
		return statusString(u, "configMapValue") == "<missing>", statusString(u, "configMapValue")
	})
	f.waitSettled(metrics, "unrelated")
	unrelatedCalls := len(f.widgetCalls("unrelated", "Reconcile"))

	cm := f.configMap("settings")
	cm.Data["value"] = "v2"
	if err := k8s.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"first", "second"} {
		testenv.Eventually(f.t, time.Minute, "a change of the ConfigMap reconciles "+name, func() (bool, string) {
			u := f.getWidget(name)
			return statusString(u, "configMapValue") == "v2", statusString(u, "configMapValue")
		})
	}
	// The ConfigMap's event enqueued every widget it maps to at once, and
	// first and second have been reconciled: once the queue is drained, a
	// reconcile of unrelated, had it been enqueued too, has been made.
	f.waitIdle(metrics, "widget")
	if n := len(f.widgetCalls("unrelated", "Reconcile")); n != unrelatedCalls {
		t.Errorf("a change of ConfigMap settings reconciled the widget pointing at another one (%d calls, then %d)", unrelatedCalls, n)
	}

	// Creating the ConfigMap a widget points at reconciles it too.
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "other"}, Data: map[string]string{"value": "late"}})
	testenv.Eventually(f.t, time.Minute, "creating the ConfigMap reconciles unrelated", func() (bool, string) {
		u := f.getWidget("unrelated")
		return statusString(u, "configMapValue") == "late", statusString(u, "configMapValue")
	})

	// label: a ServiceAccount labelled with a widget's name.
	seen := len(f.widgetCalls("first", "Reconcile"))
	f.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "robot", Labels: map[string]string{"e2e.polyop.dev/widget": "first"}}})
	testenv.Eventually(f.t, time.Minute, "a labelled ServiceAccount reconciles first", func() (bool, string) {
		n := len(f.widgetCalls("first", "Reconcile"))
		return n > seen, fmt.Sprintf("%d calls, %d before", n, seen)
	})

	// annotation: a ConfigMap annotated with a widget's name.
	seen = len(f.widgetCalls("second", "Reconcile"))
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "note", Annotations: map[string]string{"e2e.polyop.dev/widget": "second"}}})
	testenv.Eventually(f.t, time.Minute, "an annotated ConfigMap reconciles second", func() (bool, string) {
		n := len(f.widgetCalls("second", "Reconcile"))
		return n > seen, fmt.Sprintf("%d calls, %d before", n, seen)
	})
}
