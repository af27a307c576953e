// Package v1 contains the Memcached API, version v1 of the group
// examples.polyop.dev: the operator-sdk tutorial's kind, a memcached
// deployment of a given size.
//
// +kubebuilder:object:generate=true
// +groupName=examples.polyop.dev
package v1
