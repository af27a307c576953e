// Package sidecar is the host's side of the connection to a polyop sidecar.
//
// A Client dials the sidecar's gRPC endpoint (a unix socket in a volume the host
// and the sidecar share, or TCP when asked for), waits for the sidecar's health
// service to report SERVING, asks the sidecar to describe itself, and then
// carries every call with a deadline of its own. Describe hands the sidecar's
// self-description to package description, which validates it; this package
// checks the answers of the other calls (their sizes) and nothing else.
//
// The package also serves the host's readiness check (Client.Check) and records
// the duration of every call in the polyop_sidecar_call_duration_seconds
// histogram of controller-runtime's metrics registry.
package sidecar
