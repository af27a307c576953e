// Package membership is the membership of a sharded host's ring: which host
// replicas are alive, and so how the hash space is shared among them.
//
// Every replica runs a Member, which holds a Lease of its own in the host's
// namespace, named LeaseName(ring, replicaID) and labelled sharding.RingLabel=<ring>,
// and renews it; a Lease is live while its renewTime plus its
// leaseDurationSeconds lies ahead. A Member that stops gracefully deletes its
// Lease, so the others rebalance at once; one that dies stops renewing, and
// drops out when its Lease expires.
//
// Every replica also runs a Source, which watches the ring's Leases, computes
// the live ones (LiveMembers), and publishes the ring of their holders
// (ring.New) whenever the set changes: on a Lease's event, and at the next
// expiry even when nothing happens. The same live Leases give the same ring in
// every replica, so each computes the same owner for every object without
// talking to the others.
//
// Neither needs leader election: both are manager.Runnables that run on every
// replica.
//
// In the server-side mode a Member also publishes, in its Lease's annotation
// sharding.AdoptedRingAnnotation, the ring its replica has adopted
// (Publish), and the Source reads the Leases back from the API server
// (ReadLeases) for the handoff barrier of package serverside.
//
// A replica claims an object only while its Member is Holding and the
// Source's Current ring names it as the object's owner; the package only
// tells, and the host's sharding modes (label or server-side selectors) act on
// it.
//
// Metrics, in controller-runtime's registry, labelled by ring:
//
//   - polyop_shard_members: the live members the Source sees;
//   - polyop_shard_ring_changes_total: how often the Source's ring changed;
//   - polyop_shard_hash_space_share: the fraction (0 to 1) of the hash space
//     the Source's replica owns.
package membership
