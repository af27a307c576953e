package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WebsiteSpec defines the site to serve.
type WebsiteSpec struct {
	// ConfigMapName names the ConfigMap, in the Website's namespace, whose
	// data are the site's files (for example index.html). Every change to it
	// is published: the Website's pods roll to the new content.
	// +required
	// +kubebuilder:validation:MinLength=1
	ConfigMapName string `json:"configMapName"`

	// Image is the nginx image that serves the files.
	// +optional
	// +kubebuilder:default="nginx:1.27-alpine"
	Image string `json:"image,omitempty"`

	// Replicas is the number of nginx pods.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Expose serves the site through a Service on port 80. Without it the
	// Service is deleted.
	// +optional
	// +kubebuilder:default=true
	Expose *bool `json:"expose,omitempty"`
}

// WebsiteStatus is what the controller observed.
type WebsiteStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ContentHash identifies the content being published, a hash of the
	// ConfigMap's data.
	// +optional
	ContentHash string `json:"contentHash,omitempty"`

	// URL is the site's address inside the cluster, while it is exposed.
	// +optional
	URL string `json:"url,omitempty"`

	// AvailableReplicas is the number of nginx pods available, from the
	// Deployment.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// Conditions are the Website's conditions: Ready says whether the site is
	// served with its current content.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Website serves the files of a ConfigMap.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Content",type=string,JSONPath=`.spec.configMapName`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Website struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WebsiteSpec `json:"spec"`
	// +optional
	Status WebsiteStatus `json:"status,omitempty"`
}

// WebsiteList is a list of Website.
//
// +kubebuilder:object:root=true
type WebsiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Website `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Website{}, &WebsiteList{})
}
