// Package rejoin brings a replica whose shard Lease lapsed back into its
// ring without acting on a stale view.
//
// A replica paused past its Lease (a long garbage-collection pause, a frozen
// virtual machine, SIGSTOP) renews the Lease the moment it runs again, while
// its informers still hold what they held before the pause: objects that
// have since gone to other replicas, in versions those replicas have since
// changed. Its membership.Member counts that renewal as the start of a new
// term, and holds the term only once it is confirmed. The Rejoiner confirms
// it once the replica's view is fresh again:
//
//   - in the server-side mode, the ring is read again from the Leases
//     themselves (not the informer), with the replica's new incarnation in
//     its ID, and the handoff barrier has adopted that ring and seen every
//     other member adopt it, so nothing agreed before the pause counts;
//   - for every sharded kind, a list from the API server made after the
//     rejoin shows that the cache has caught up: every object the cache
//     holds is there in the listed version or a newer one, and every object
//     the list no longer has in the replica's share has left the cache.
//
// Until then the replica starts no reconcile and writes nothing, and its
// readiness check says that it is rejoining.
package rejoin
