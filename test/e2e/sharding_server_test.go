package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/polyop/polyop/internal/sharding"
	"github.com/polyop/polyop/internal/sharding/ring"
)

// Three host replicas in server mode share one ring through the API
// server's sharded list and watch (the suite's API server runs with the
// ShardedListAndWatch feature gate): every object converges, unlabelled,
// each replica caching exactly the objects the ring of live replicas gives
// it; when one is killed, its objects move to the others once its Lease
// expires, and converge there; none is reconciled by two replicas at once.
func TestServerShardedReplicasShareTheObjectsAndTakeOverADeadOnesShare(t *testing.T) {
	t.Parallel()
	const (
		n             = 150
		ringName      = "servershard"
		leaseDuration = 6 * time.Second
	)
	f := newFixture(t)
	r := f.startShardRing(ringName, 3, "--sharding", "server", "--shard-lease-duration", leaseDuration.String(),
		"--leader-election-namespace", f.ns)
	for i := range n {
		f.create(f.window(fmt.Sprintf("w%03d", i), nil))
	}
	// In server mode an object belongs to the replica the ring of the live
	// replicas gives its UID; nothing labels it.
	byRing := func(u *unstructured.Unstructured, live []*shardReplica) string {
		if _, labelled := u.GetLabels()[sharding.ShardLabel(ringName)]; labelled {
			return "labelled"
		}
		ids := make([]string, len(live))
		for i, rep := range live {
			ids[i] = rep.id
		}
		return ring.New(ids, 0).OwnerOf(u.GetUID())
	}
	r.awaitConverged(r.replicas, n, 1, byRing, "every object reconciled, each replica caching exactly its share")
	r.checkNoOverlap()

	victim := r.replicas[1]
	killed := time.Now()
	victim.host.Kill()
	f.changeEveryWindow(n, "2h")
	r.awaitConverged(r.without(victim), n, 2, byRing, fmt.Sprintf("every object reconciled again after %s died, by the two others", victim.id))
	t.Logf("every object reconciled again %s after %s was killed (its Lease lasts %s)", time.Since(killed).Round(100*time.Millisecond), victim.id, leaseDuration)
	r.checkNoOverlap()
}
