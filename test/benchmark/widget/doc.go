// Package widget is the logic of the benchmark's Widget controller, shared by
// every Go variant so that they differ only in how they are run: what
// ConfigMap a Widget wants, when a ConfigMap already holds it, and the status
// that says so.
//
// The controller copies a Widget's spec.data into a ConfigMap of the same
// name, owned by the Widget, and then reports the Ready condition. A
// reconcile that finds the ConfigMap and the status as they should be writes
// nothing.
package widget
