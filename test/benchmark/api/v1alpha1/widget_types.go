package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WidgetSpec is the data a Widget's ConfigMap must hold.
type WidgetSpec struct {
	// Data is copied into the Widget's ConfigMap, key by key.
	// +optional
	Data map[string]string `json:"data,omitempty"`
}

// ReadyCondition is the condition a Widget reports once its ConfigMap holds
// its data.
const ReadyCondition = "Ready"

// WidgetStatus is where a Widget stands.
type WidgetStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ConfigMapName names the ConfigMap the Widget owns.
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`

	// Conditions: Ready is True once the ConfigMap holds the spec's data.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Widget is an object whose data its controller copies into a ConfigMap.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetSpec   `json:"spec,omitempty"`
	Status WidgetStatus `json:"status,omitempty"`
}

// WidgetList is a list of Widgets.
//
// +kubebuilder:object:root=true
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}
