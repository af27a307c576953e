package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaintenanceWindowSpec defines when a maintenance window is open.
//
// The fields are strings, checked by the controller rather than by the API
// server, so that a mistake shows up in the object's status (phase Invalid,
// condition Degraded) instead of being refused.
type MaintenanceWindowSpec struct {
	// Start is when the (first) window opens, as an RFC 3339 time, for example
	// "2026-01-01T00:00:00Z".
	// +required
	// +kubebuilder:validation:MinLength=1
	Start string `json:"start"`

	// Duration is how long each window stays open, as a Go duration, for
	// example "2h" or "90m". It must be positive. The defaulting webhook sets
	// it to "1h" when it is left out.
	// +optional
	Duration string `json:"duration,omitempty"`

	// Every makes the window recur with this period, as a Go duration, for
	// example "24h" or "168h". It must not be shorter than duration. Without
	// it the window opens once.
	// +optional
	Every string `json:"every,omitempty"`

	// Paused stops the schedule: the phase is Paused until it is unset.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// MaintenanceWindowPhase is where a maintenance window stands.
type MaintenanceWindowPhase string

const (
	// PhasePending means no window is open; one opens at nextTransition.
	PhasePending MaintenanceWindowPhase = "Pending"
	// PhaseActive means a window is open; it closes at nextTransition.
	PhaseActive MaintenanceWindowPhase = "Active"
	// PhaseFinished means the window, which does not recur, has closed.
	PhaseFinished MaintenanceWindowPhase = "Finished"
	// PhasePaused means spec.paused is set.
	PhasePaused MaintenanceWindowPhase = "Paused"
	// PhaseInvalid means the spec is invalid; the Degraded condition says why.
	PhaseInvalid MaintenanceWindowPhase = "Invalid"
)

// MaintenanceWindowStatus is where a maintenance window stands.
type MaintenanceWindowStatus struct {
	// Phase is Pending, Active, Finished, Paused or Invalid.
	// +optional
	Phase MaintenanceWindowPhase `json:"phase,omitempty"`

	// CurrentWindowStart is when the open window opened; while Pending, when
	// the next one opens; when Finished, when the last one opened.
	// +optional
	CurrentWindowStart *metav1.Time `json:"currentWindowStart,omitempty"`

	// CurrentWindowEnd is when the window of currentWindowStart closes.
	// +optional
	CurrentWindowEnd *metav1.Time `json:"currentWindowEnd,omitempty"`

	// NextTransition is when the phase changes next: when the open window
	// closes, or the next one opens. Unset when nothing is scheduled.
	// +optional
	NextTransition *metav1.Time `json:"nextTransition,omitempty"`

	// ObservedGeneration is the metadata.generation this status was computed
	// from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready (the schedule is computed) and Degraded (the spec
	// is invalid).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MaintenanceWindow is a period, once or recurring, in which maintenance may
// happen.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=mw
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.status.nextTransition`,description="When the phase changes next"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MaintenanceWindow struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec MaintenanceWindowSpec `json:"spec"`
	// +optional
	Status MaintenanceWindowStatus `json:"status,omitzero"`
}

// MaintenanceWindowList is a list of MaintenanceWindows.
//
// +kubebuilder:object:root=true
type MaintenanceWindowList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MaintenanceWindow `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MaintenanceWindow{}, &MaintenanceWindowList{})
}
