// Package host wires the polyop host together: it connects to the sidecar,
// asks it to describe itself, resolves every declared kind through API
// discovery, and runs a controller-runtime Manager with one controller per
// declared controller, readiness tied to the sidecar's health, metrics, health
// probes and leader election.
//
// cmd/host is a thin main around Options.BindFlags and Run.
package host
