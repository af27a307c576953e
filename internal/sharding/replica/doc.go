// Package replica runs the sharding of one replica of a sharded host, in
// either mode (docs/sharding.md): labels, where the elected replica's
// sharder labels each object with its owner, and server, where the API
// server's sharded list and watch gives each replica its share.
//
// A Plan is what sharding changes in a host, checked against the sidecar's
// resolved description before anything runs: the mode, the ring and the
// replica's place in it, the primary kind, and the kinds whose cache holds
// only the replica's share (NewPlan). A Runtime carries the plan out: the
// replica's Lease and the ring of live ones (package membership), the
// handoff barrier (package serverside) or the label-mode sharder (package
// sharder), the rejoin after a lapse (package rejoin), the reconciler
// wrapper that reconciles only while the replica holds its Lease, and the
// polyop_shard_owned_objects gauge. The host wires it into its manager:
// CacheOptions before the manager is made, SetUp, ChildLabels and Wrap
// after.
package replica
