// Package sharder spreads the objects of one primary kind over the replicas
// of a sharded host by labelling them, for API servers that do not serve
// sharded list and watch (the ShardedListAndWatch feature gate is off).
//
// Two halves work together:
//
//   - The sharder (Add) runs on the ring's elected leader only. It reads the
//     primary kind's objects as metadata, from a cache of its own that sees
//     them all (NewCache), and gives each the shard label
//     shard.sharding.polyop.dev/<ring>: <member>, the member being the ring's
//     owner of the object's UID. When the ring changes, it re-evaluates every
//     object: an object whose labelled member is still live but no longer the
//     owner gets the drain label drain.sharding.polyop.dev/<ring>: "true" and
//     stays with that member until it lets go; an object whose labelled
//     member has left the ring (its Lease expired: it is dead) moves straight
//     to the new owner.
//   - The Shard runs in every replica. Its Selector narrows the replica's
//     informers to the objects labelled with its member, so the API server
//     sends each replica only its share. Its Reconciler wraps the replica's
//     reconciler: it reconciles only objects labelled with its member and,
//     when one carries the drain label, waits until no reconcile of it is in
//     flight in the replica (InFlight), then removes the shard and drain
//     labels in one patch. The sharder then labels the object for its new
//     owner, whose informers see it only from then on.
//
// So an object moves between live replicas only after its old owner stopped
// reconciling it, and no object is reconciled by two replicas at once.
//
// The ring comes from a RingSource: the sharding membership publishes the
// ring of live Leases; StaticSource is a ring set by hand, for tests and fixed
// memberships.
package sharder
