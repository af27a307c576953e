package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CrewSpec is the desired state of a Crew.
type CrewSpec struct {
	// Size is the number of Jobs the Crew runs. The webhook defaults it to 1
	// and refuses more than 5.
	// +optional
	Size *int32 `json:"size,omitempty"`
	// Image is the image each Job runs. The webhook defaults it.
	// +optional
	Image string `json:"image,omitempty"`
}

// CrewStatus is the observed state of a Crew.
type CrewStatus struct {
	// Jobs are the names of the Jobs the Crew controls, sorted, as the
	// reconciler last listed them.
	// +optional
	Jobs []string `json:"jobs,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status

// Crew runs spec.size Jobs of spec.image, each controlled by the Crew.
type Crew struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CrewSpec   `json:"spec,omitempty"`
	Status CrewStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// CrewList is a list of Crews.
type CrewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Crew `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Crew{}, &CrewList{})
}
