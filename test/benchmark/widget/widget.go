package widget

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	benchv1alpha1 "github.com/polyop/polyop/test/benchmark/api/v1alpha1"
)

// ControllerName is the name of the Widget controller in every variant, and
// so the controller label of its metrics.
const ControllerName = "widget"

// WidgetLabel is set on every ConfigMap to the name of its Widget.
const WidgetLabel = "bench.polyop.dev/widget"

// ConfigMap returns the ConfigMap w wants: same name and namespace, w's data,
// and the WidgetLabel. It carries no owner reference: setting it is the
// caller's job (the in-process operator) or the host's.
func ConfigMap(w *benchv1alpha1.Widget) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      w.Name,
			Namespace: w.Namespace,
			Labels:    map[string]string{WidgetLabel: w.Name},
		},
		Data: maps.Clone(w.Spec.Data),
	}
}

// Holds reports whether the observed ConfigMap already holds everything
// desired sets (its labels and data) and is controlled by owner: applying
// desired again would change nothing.
func Holds(observed, desired *corev1.ConfigMap, owner metav1.Object) bool {
	if !metav1.IsControlledBy(observed, owner) {
		return false
	}
	for k, v := range desired.Labels {
		if got, ok := observed.Labels[k]; !ok || got != v {
			return false
		}
	}
	return maps.Equal(observed.Data, desired.Data)
}

// MarkReady sets w's status to say that its ConfigMap holds its spec: the
// observed generation, the ConfigMap's name and the Ready condition. The
// condition's transition time changes only when its status does, so marking
// a ready Widget ready again leaves its status as it was.
func MarkReady(w *benchv1alpha1.Widget) {
	w.Status.ObservedGeneration = w.Generation
	w.Status.ConfigMapName = w.Name
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
		Type:               benchv1alpha1.ReadyCondition,
		Status:             metav1.ConditionTrue,
		Reason:             "ConfigMapReady",
		Message:            "the ConfigMap holds the data",
		ObservedGeneration: w.Generation,
	})
}

// IsReady reports whether w's status says Ready for its current generation.
func IsReady(w *benchv1alpha1.Widget) bool {
	if w.Status.ObservedGeneration != w.Generation {
		return false
	}
	return meta.IsStatusConditionTrue(w.Status.Conditions, benchv1alpha1.ReadyCondition)
}
