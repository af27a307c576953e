// Package fencing keeps a replica that has lost its lease from writing.
//
// A lease — the leader election's, or a replica's shard Lease — is a promise
// about time, and a process can be paused past it: a long garbage-collection
// pause, a frozen virtual machine, SIGSTOP. When such a replica runs again it
// still believes what it believed before the pause: that it leads, or owns
// its share, and that its cache is current. Meanwhile another replica has
// taken over and written newer state. Anything the paused replica writes now
// would roll that back.
//
// The package names what a replica holds as a Term: a numbered stretch of
// time during which it holds its lease. A replica's Fence tells its current
// term. A term ends when the replica last renewed its lease longer ago than
// the renew deadline allows; the next successful renewal after that starts a
// new term, with a higher number, even when nobody else took the lease in
// between (the replica cannot know that nobody did).
//
// A reconcile records the term it begins under (WithTerm) and checks it
// again right before each of its writes (Check, WriteContext): a write is made
// only while the same term is still held, and with a deadline at the term's
// end, so a write that a pause holds back past the term fails in the client
// rather than reaching the API server late. The answer of a sidecar call that
// began under a term that has since ended is discarded.
//
// What the package offers:
//
//   - Term, Fence and Func: the term a replica holds, and who tells it;
//   - Check and WriteContext: the checks made before each write;
//   - WithTerm and TermFrom: the term a reconcile began under, in its context;
//   - LapsedError: the error of a write refused because the term ended;
//   - LeaderLock: a leader election resource lock that is also the Fence of
//     the elected replica.
//
// docs/sharding.md says why these checks, together with the preconditions
// the host puts on its writes, keep a paused replica's writes out.
package fencing
