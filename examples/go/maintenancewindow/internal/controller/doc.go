// Package controller reconciles MaintenanceWindow objects: it validates the
// spec, works out from the clock whether a window is open, and reports that in
// the status, with a requeue at the next transition.
//
// It touches nothing but the object's status and events, so the whole
// controller is one Reconcile method; the polyop host writes the status and
// records the events.
package controller
