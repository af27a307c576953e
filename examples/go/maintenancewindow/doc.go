// Command maintenancewindow is a polyop sidecar that reconciles
// MaintenanceWindow objects (examples.polyop.dev/v1): it reports in each
// window's status whether it is open and when that changes next.
//
// It serves the polyop sidecar API on --address for a polyop host in the same
// pod, which watches the objects and writes the status this sidecar computes.
//
// Usage:
//
//	maintenancewindow [--address unix:///var/run/polyop/sidecar.sock] [--max-message-size 64Mi] [--zap-log-level info]
package main
