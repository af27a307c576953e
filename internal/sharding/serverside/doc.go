// Package serverside is the server-side mode of sharding: for API servers
// that serve sharded list and watch (the ShardedListAndWatch feature gate),
// each replica's informers of the primary kind list and watch only its share
// of the hash space (ListOptions.ShardSelector, built from the ring), so the
// API server filters the objects and no label on them is needed.
//
// Three parts work together in every replica:
//
//   - Share (ListerWatcher, NewInformer) sets the shard selector of the
//     replica's current ranges on every list and watch of the primary kind.
//     When the ring changes, it ends the open watch with an Expired error,
//     which makes client-go's reflector list again, with the new selector:
//     the list replaces the informer's store, so the objects that left the
//     share are deleted from the cache and those that joined are added.
//   - Barrier hands objects over without two replicas reconciling one at
//     once, through the members' Leases: a replica adopts each new ring once
//     no reconcile of an object that ring gives another member is in flight
//     in it, writes the ring's ID into its Lease
//     (sharding.AdoptedRingAnnotation), and reconciles by that ring only once
//     it has read, after its own write, that every other member of the ring
//     has adopted it too.
//   - Reconciler wraps the replica's reconciler of the primary kind: it
//     reconciles an object only when the Barrier lets it begin, and takes an
//     object missing from the cache for one that is gone or left the share,
//     not for a deletion to act on.
//
// docs/sharding.md says why the barrier is safe and what a user sees.
package serverside
