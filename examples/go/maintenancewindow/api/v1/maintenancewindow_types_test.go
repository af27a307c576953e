package v1_test

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
)

func TestAddToSchemeRegistersTheKinds(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for obj, want := range map[runtime.Object]string{
		&v1.MaintenanceWindow{}:     "MaintenanceWindow",
		&v1.MaintenanceWindowList{}: "MaintenanceWindowList",
	} {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			t.Fatal(err)
		}
		if gvk.GroupVersion() != v1.GroupVersion || gvk.Kind != want {
			t.Errorf("%T is %s, want %s in %s", obj, gvk, want, v1.GroupVersion)
		}
	}
}

func TestAnEmptyStatusIsLeftOut(t *testing.T) {
	t.Parallel()
	data, err := json.Marshal(&v1.MaintenanceWindow{Spec: v1.MaintenanceWindowSpec{Start: "2026-01-01T00:00:00Z", Duration: "2h"}})
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["status"]; ok {
		t.Errorf("an empty status is serialized: %s", data)
	}
}

func TestDeepCopyCopiesTheStatus(t *testing.T) {
	t.Parallel()
	now := metav1.Now()
	mw := &v1.MaintenanceWindow{Status: v1.MaintenanceWindowStatus{
		NextTransition: &now,
		Conditions:     []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}},
	}}
	cp := mw.DeepCopy()
	cp.Status.NextTransition.Time = cp.Status.NextTransition.Add(1)
	cp.Status.Conditions[0].Status = metav1.ConditionFalse
	if !mw.Status.NextTransition.Equal(&now) || mw.Status.Conditions[0].Status != metav1.ConditionTrue {
		t.Error("changing the copy changed the original")
	}
}
