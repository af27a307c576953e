// Package host wires the polyop host together: it connects to the sidecar,
// asks it to describe itself, resolves every declared kind through API
// discovery, and runs a controller-runtime Manager with one controller per
// declared controller, readiness tied to the sidecar's health, metrics, health
// probes and leader election.
//
// Run resolves its Options once into a plan (plan.go): every value derived
// from them, such as the cluster service's address and TLS, the leader
// election's Lease, the sharding plan and the webhook server's defaults, is
// computed there, and Run wires the host from the plan. The sharding of a
// replica runs in package sharding/replica.
//
// cmd/host is a thin main around Options.BindFlags and Run.
package host
