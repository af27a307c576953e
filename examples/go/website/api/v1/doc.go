// Package v1 contains the Website API, version v1 of the group
// examples.polyop.dev.
//
// A Website serves the files of a ConfigMap with nginx: its controller
// declares a Deployment, a Service and a ConfigMap as its desired children,
// and the host applies them.
//
// +kubebuilder:object:generate=true
// +groupName=examples.polyop.dev
package v1
