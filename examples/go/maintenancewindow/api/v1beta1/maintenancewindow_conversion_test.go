package v1beta1_test

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	"github.com/polyop/polyop/examples/go/maintenancewindow/api/v1beta1"
)

func TestTheKindConvertsThroughItsHub(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ok, err := conversion.IsConvertible(scheme, &v1.MaintenanceWindow{})
	if err != nil || !ok {
		t.Errorf("IsConvertible = %v, %v; want true", ok, err)
	}
}

func TestConversionIsLossless(t *testing.T) {
	t.Parallel()
	next := metav1.NewTime(time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC))
	hub := &v1.MaintenanceWindow{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "nightly", Labels: map[string]string{"team": "storage"}, Generation: 4},
		Spec:       v1.MaintenanceWindowSpec{Start: "2026-01-01T00:00:00Z", Duration: "2h", Every: "24h", Paused: true},
		Status: v1.MaintenanceWindowStatus{
			Phase: v1.PhasePaused, NextTransition: &next, ObservedGeneration: 4,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Paused"}},
		},
	}
	beta := &v1beta1.MaintenanceWindow{}
	if err := beta.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	if beta.Spec.Schedule.Start != hub.Spec.Start || beta.Spec.Schedule.Every != "24h" || !beta.Spec.Suspend || beta.Spec.Duration != "2h" {
		t.Errorf("v1beta1 spec = %+v", beta.Spec)
	}
	back := &v1.MaintenanceWindow{}
	if err := beta.ConvertTo(back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, hub) {
		t.Errorf("v1 → v1beta1 → v1 changed the object:\n got %+v\nwant %+v", back, hub)
	}
}
