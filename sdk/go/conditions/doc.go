// Package conditions reads and writes metav1.Condition lists, the conditions
// of an object's status, on top of k8s.io/apimachinery/pkg/api/meta.
//
// Set and the Mark functions keep a condition's lastTransitionTime when its
// status does not change, so a reconcile that finds nothing new leaves the
// status exactly as it was and the host writes nothing:
//
//	conditions.MarkTrue(&obj.Status.Conditions, conditions.Ready, "Reconciled", "The window is scheduled", obj.Generation)
//	if conditions.IsFalse(obj.Status.Conditions, conditions.Degraded) { ... }
//
// Types are CamelCase (Ready, Degraded), reasons are CamelCase words, and
// observedGeneration records the metadata.generation the condition was
// computed from.
package conditions
