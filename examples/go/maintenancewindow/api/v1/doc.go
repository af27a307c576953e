// Package v1 contains the MaintenanceWindow API, version v1 of the group
// examples.polyop.dev.
//
// A MaintenanceWindow names a period, once or recurring, in which maintenance
// may happen; its status says whether the window is open and when that
// changes next, for other tools to read.
//
// +kubebuilder:object:generate=true
// +groupName=examples.polyop.dev
package v1
