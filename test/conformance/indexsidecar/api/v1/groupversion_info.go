// Package v1 is the conformance.polyop.dev/v1 API of the conformance test's
// operator: the Crew kind, as a kubebuilder project's api/v1 declares it.
// +kubebuilder:object:generate=true
// +groupName=conformance.polyop.dev
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "conformance.polyop.dev", Version: "v1"}

	// SchemeBuilder registers this API's types in a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
