// Package v1alpha1 contains the Widget API (group bench.polyop.dev), the kind
// polyop's end-to-end benchmark reconciles.
//
// A Widget carries a little data; its controller copies the data into a
// ConfigMap of the same name that the Widget owns, and reports Ready in its
// status once the ConfigMap holds it. Every variant of the benchmark (the
// in-process controller-runtime operator and the sidecars) reconciles these
// same types. The deep copies and the CRD (in ../../config/crd) are generated
// by controller-gen: run make generate-examples after changing the types.
//
// +kubebuilder:object:generate=true
// +groupName=bench.polyop.dev
package v1alpha1
