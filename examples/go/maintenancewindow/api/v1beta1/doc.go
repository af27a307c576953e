// Package v1beta1 contains version v1beta1 of the MaintenanceWindow API, of
// the group examples.polyop.dev: the API as it was before v1, still served so
// that clients written against it keep working.
//
// v1beta1 grouped when the windows open under spec.schedule and called
// pausing suspending; v1 flattened both:
//
//	v1beta1               v1
//	spec.schedule.start   spec.start
//	spec.schedule.every   spec.every
//	spec.duration         spec.duration
//	spec.suspend          spec.paused
//
// The status is the same in both. v1 is the storage version and the hub:
// v1beta1 converts to and from it (ConvertTo, ConvertFrom), losslessly,
// through the conversion webhook the sidecar serves. (A beta rather than a
// v2 keeps v1 the version kubectl uses by default, so a cluster whose CRD
// lacks the conversion webhook still reads and writes v1 correctly.)
//
// +kubebuilder:object:generate=true
// +groupName=examples.polyop.dev
package v1beta1
