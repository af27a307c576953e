package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Standard condition types.
const (
	// Ready is True when the object is reconciled and serves its purpose.
	Ready = "Ready"
	// Degraded is True when the object is failing, for example because its spec
	// is invalid.
	Degraded = "Degraded"
)

// Set adds c to conds, or updates the condition of the same type, and reports
// whether anything changed. Its lastTransitionTime is set to c's (or to now,
// when c has none) when the status changes, and kept otherwise. It is
// meta.SetStatusCondition.
func Set(conds *[]metav1.Condition, c metav1.Condition) bool {
	return meta.SetStatusCondition(conds, c)
}

// MarkTrue sets the condition condType to True, with reason, message and the
// generation it was computed from, and reports whether anything changed.
func MarkTrue(conds *[]metav1.Condition, condType, reason, message string, generation int64) bool {
	return mark(conds, condType, metav1.ConditionTrue, reason, message, generation)
}

// MarkFalse sets the condition condType to False, with reason, message and
// the generation it was computed from, and reports whether anything changed.
func MarkFalse(conds *[]metav1.Condition, condType, reason, message string, generation int64) bool {
	return mark(conds, condType, metav1.ConditionFalse, reason, message, generation)
}

// MarkUnknown sets the condition condType to Unknown, with reason, message and
// the generation it was computed from, and reports whether anything changed.
func MarkUnknown(conds *[]metav1.Condition, condType, reason, message string, generation int64) bool {
	return mark(conds, condType, metav1.ConditionUnknown, reason, message, generation)
}

func mark(conds *[]metav1.Condition, condType string, status metav1.ConditionStatus, reason, message string, generation int64) bool {
	return Set(conds, metav1.Condition{
		Type:               condType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: generation,
	})
}

// Get returns the condition condType, or nil when conds has none.
func Get(conds []metav1.Condition, condType string) *metav1.Condition {
	return meta.FindStatusCondition(conds, condType)
}

// IsTrue reports whether the condition condType is present and True.
func IsTrue(conds []metav1.Condition, condType string) bool {
	return meta.IsStatusConditionTrue(conds, condType)
}

// IsFalse reports whether the condition condType is present and False.
func IsFalse(conds []metav1.Condition, condType string) bool {
	return meta.IsStatusConditionFalse(conds, condType)
}

// IsUnknown reports whether the condition condType is absent or Unknown.
func IsUnknown(conds []metav1.Condition, condType string) bool {
	c := Get(conds, condType)
	return c == nil || c.Status == metav1.ConditionUnknown
}

// Remove removes the condition condType and reports whether it was present.
func Remove(conds *[]metav1.Condition, condType string) bool {
	return meta.RemoveStatusCondition(conds, condType)
}
