package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// Three host replicas share one ring, in each sharding mode (one sidecar
// each, all three holding a lock file per object while they reconcile it, so
// that any two reconciles of one object in flight at once are recorded):
// every object converges, each replica caching exactly its share (its
// metrics; in server mode the objects stay unlabelled and a replica's share is
// what the ring of the live replicas gives it), and when one replica is killed
// its objects move to the others once its Lease expires, and converge there;
// none is reconciled by two replicas at once.
func TestShardedReplicasShareTheObjectsAndTakeOverADeadOnesShare(t *testing.T) {
	t.Parallel()
	inEveryShardingMode(t, testShardedReplicasShare)
}

func testShardedReplicasShare(t *testing.T, mode shardingMode) {
	const n = 150
	f := newFixture(t)
	s := newShardRing(f, mode, "shardtest", 6*time.Second)
	s.n = n
	s.sidecar = s.testSidecar("--delay", "20ms")
	replicas := make([]*shardReplica, 3)
	for i := range replicas {
		replicas[i] = s.start(fmt.Sprintf("host-%d", i))
	}

	for i := range n {
		f.create(f.window(s.window(i), nil))
	}
	s.converged(replicas, 1, "every object reconciled, each replica caching exactly its share")
	s.noOverlap()

	// Kill a replica that does not lead (in label mode the leader runs the
	// sharder), then change every object: the dead replica's objects must
	// reach the others once its Lease expires, and be reconciled there.
	victim := s.pickNonLeader(replicas)
	killed := time.Now()
	victim.host.Kill()
	live := without(replicas, victim)
	s.changeEveryWindow("2h")
	s.converged(live, 2, fmt.Sprintf("every object reconciled again after %s died, by the two others", victim.id))
	t.Logf("every object reconciled again %s after %s was killed (its Lease lasts %s)", time.Since(killed).Round(100*time.Millisecond), victim.id, s.leaseDuration)
	s.noOverlap()
}

// Each child a sharded replica applies carries its controller's shard label,
// in each sharding mode, so the child informers of the owner select it: the
// Secrets (owned, and not watched) are cached by the replica that owns their
// Widget only; the ConfigMaps, which the sidecar also watches, are labelled
// too but cached whole. In label mode a Widget's replica is its label; in
// server mode, where Widgets carry none, the ring's owner of its UID.
func TestShardedReplicasLabelTheChildrenTheyApply(t *testing.T) {
	t.Parallel()
	inEveryShardingMode(t, testShardedChildren)
}

func testShardedChildren(t *testing.T, mode shardingMode) {
	const n = 30
	f := newFixture(t)
	s := newShardRing(f, mode, "shardchildren", 6*time.Second)
	s.sidecar = func(r *shardReplica, socket string) *testenv.Process {
		return s.process(r.id+"-sidecar", testSidecarBin, "children", "--address", socket, "--name", s.name, "--log-file", r.callLog)
	}
	replicas := make([]*shardReplica, 2)
	for i := range replicas {
		replicas[i] = s.start(fmt.Sprintf("child-host-%d", i))
	}
	ownerOf := s.owners(replicas)
	for i := range n {
		f.createWidget(fmt.Sprintf("w%02d", i), map[string]any{
			"configMaps": []any{fmt.Sprintf("cm%02d", i)}, "secrets": []any{fmt.Sprintf("s%02d", i)}, "value": "v",
		})
	}

	testenv.Eventually(t, 3*time.Minute, "every Widget ready, its children labelled with its replica, each replica caching its share", func() (bool, string) {
		owners := map[string]string{}
		owned := map[string]int{}
		for i := range n {
			w := f.getWidget(fmt.Sprintf("w%02d", i))
			if w == nil || phase(w) != "Ready" {
				return false, fmt.Sprintf("w%02d is not ready", i)
			}
			owner := ownerOf(w)
			owners[w.GetName()] = owner
			owned[owner]++
		}
		secrets := map[string]int{}
		for i := range n {
			for _, child := range []struct {
				kind, name string
			}{{"ConfigMap", fmt.Sprintf("cm%02d", i)}, {"Secret", fmt.Sprintf("s%02d", i)}} {
				u := &unstructured.Unstructured{}
				u.SetAPIVersion("v1")
				u.SetKind(child.kind)
				if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: child.name}, u); err != nil {
					return false, fmt.Sprintf("%s %s: %v", child.kind, child.name, err)
				}
				if got, want := u.GetLabels()[s.label], owners[fmt.Sprintf("w%02d", i)]; got != want {
					return false, fmt.Sprintf("%s %s is labelled %q, its Widget belongs to %q", child.kind, child.name, got, want)
				}
				if child.kind == "Secret" {
					secrets[u.GetLabels()[s.label]]++
				}
			}
		}
		for _, r := range replicas {
			scrape, err := f.scrapeMetrics(r.metrics)
			if err != nil {
				return false, err.Error()
			}
			widgets := metric(scrape, "polyop_shard_owned_objects", "ring", s.name, "kind", "Widget.e2e.polyop.dev/v1")
			cached := metric(scrape, "polyop_shard_owned_objects", "ring", s.name, "kind", "Secret.v1")
			if int(widgets) != owned[r.id] || int(cached) != secrets[r.id] || owned[r.id] == 0 {
				return false, fmt.Sprintf("%s caches %v Widgets and %v Secrets; %d and %d are its own", r.id, widgets, cached, owned[r.id], secrets[r.id])
			}
			if strings.Contains(scrape, `polyop_shard_owned_objects{kind="ConfigMap.v1"`) {
				return false, fmt.Sprintf("%s counts ConfigMaps as sharded, though the sidecar watches them", r.id)
			}
		}
		return true, ""
	})
}
