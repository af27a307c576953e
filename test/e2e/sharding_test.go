package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/sharding"
	"github.com/polyop/polyop/internal/sharding/ring"
	"github.com/polyop/polyop/internal/testenv"
)

// Three host replicas in label mode share one ring (one sidecar each, all
// three holding a lock file per object while they reconcile it, so that any
// two reconciles of one object in flight at once are recorded): every object
// converges, each replica caches only its share (its metrics), and when one
// replica is killed its objects move to the others once its Lease expires,
// and converge there; none is reconciled by two replicas at once.
func TestShardedReplicasShareTheObjectsAndTakeOverADeadOnesShare(t *testing.T) {
	t.Parallel()
	const (
		n             = 150
		ringName      = "shardtest"
		leaseDuration = 6 * time.Second
	)
	f := newFixture(t)
	shardLabel := sharding.ShardLabel(ringName)
	r := f.startShardRing(ringName, 3,
		"--leader-elect", "--leader-election-namespace", f.ns,
		"--leader-election-lease-duration", "6s", "--leader-election-renew-deadline", "4s", "--leader-election-retry-period", "1s",
		"--sharding", "labels", "--shard-lease-duration", leaseDuration.String(),
	)
	for i := range n {
		f.create(f.window(fmt.Sprintf("w%03d", i), nil))
	}
	// In label mode an object belongs to the replica it is labelled with.
	labelled := func(u *unstructured.Unstructured, _ []*shardReplica) string { return u.GetLabels()[shardLabel] }
	r.awaitConverged(r.replicas, n, 1, labelled, "every object reconciled, each replica caching exactly its share")
	r.checkNoOverlap()

	// Kill a replica that does not lead (the leader runs the sharder), then
	// change every object: the dead replica's objects must reach the others
	// once its Lease expires, and be reconciled there.
	var victim *shardReplica
	for _, rep := range r.replicas {
		if !strings.Contains(rep.host.Output(), "Successfully acquired lease") {
			victim = rep
			break
		}
	}
	killed := time.Now()
	victim.host.Kill()
	f.changeEveryWindow(n, "2h")
	r.awaitConverged(r.without(victim), n, 2, labelled, fmt.Sprintf("every object reconciled again after %s died, by the two others", victim.id))
	t.Logf("every object reconciled again %s after %s was killed (its Lease lasts %s)", time.Since(killed).Round(100*time.Millisecond), victim.id, leaseDuration)
	r.checkNoOverlap()
}

// Each child a sharded replica applies carries its controller's shard label,
// so the child informers of the owner select it: the Secrets (owned, and not
// watched) are cached by the replica that owns their Widget only; the
// ConfigMaps, which the sidecar also watches, are labelled too but cached
// whole. In label mode a Widget's replica is its label; in server mode,
// where Widgets carry none, the ring's owner of its UID.
func TestShardedReplicasLabelTheChildrenTheyApply(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"labels", "server"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testShardedChildren(t, mode)
		})
	}
}

func testShardedChildren(t *testing.T, mode string) {
	const n = 30
	ringName := "shardchildren-" + mode
	f := newFixture(t)
	dir := filepath.Dir(f.socket)
	shardLabel := sharding.ShardLabel(ringName)
	replicas := make([]*shardReplica, 2)
	for i := range replicas {
		r := &shardReplica{id: fmt.Sprintf("child-host-%d", i), metrics: freePort(t)}
		socket := "unix://" + filepath.Join(dir, r.id+".sock")
		f.start("sidecar", childSidecarBin, "--address", socket, "--name", ringName, "--log-file", filepath.Join(dir, r.id+".jsonl"))
		args := []string{
			"--sidecar-address", socket,
			"--cluster-address", "unix://" + filepath.Join(dir, r.id+"-cluster.sock"),
			"--metrics-bind-address", r.metrics, "--metrics-secure=false",
			"--leader-election-namespace", f.ns,
			"--sharding", mode, "--shard-replica-id", r.id, "--shard-lease-duration", "6s",
		}
		if mode == "labels" {
			args = append(args, "--leader-elect",
				"--leader-election-lease-duration", "6s", "--leader-election-renew-deadline", "4s", "--leader-election-retry-period", "1s")
		}
		r.host = f.startHost(args...)
		replicas[i] = r
	}
	ids := make([]string, len(replicas))
	for i, r := range replicas {
		ids[i] = r.id
	}
	// owner is the replica a Widget belongs to.
	owner := func(w *unstructured.Unstructured) string {
		if mode == "labels" {
			return w.GetLabels()[shardLabel]
		}
		return ring.New(ids, 0).OwnerOf(w.GetUID())
	}
	for i := range n {
		f.createWidget(fmt.Sprintf("w%02d", i), map[string]any{
			"configMaps": []any{fmt.Sprintf("cm%02d", i)}, "secrets": []any{fmt.Sprintf("s%02d", i)}, "value": "v",
		})
	}

	testenv.Eventually(t, 3*time.Minute, "every Widget ready, its children labelled with its replica, each replica caching its share", func() (bool, string) {
		owners := map[string]string{}
		labelled := map[string]int{}
		for i := range n {
			w := f.getWidget(fmt.Sprintf("w%02d", i))
			if w == nil || phase(w) != "Ready" {
				return false, fmt.Sprintf("w%02d is not ready", i)
			}
			who := owner(w)
			owners[w.GetName()] = who
			labelled[who]++
		}
		secrets := map[string]int{}
		for i := range n {
			for _, child := range []struct {
				kind, name string
			}{{"ConfigMap", fmt.Sprintf("cm%02d", i)}, {"Secret", fmt.Sprintf("s%02d", i)}} {
				u := &unstructured.Unstructured{}
				u.SetAPIVersion("v1")
				u.SetKind(child.kind)
				if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: child.name}, u); err != nil {
					return false, fmt.Sprintf("%s %s: %v", child.kind, child.name, err)
				}
				if got, want := u.GetLabels()[shardLabel], owners[fmt.Sprintf("w%02d", i)]; got != want {
					return false, fmt.Sprintf("%s %s is labelled %q, its Widget %q", child.kind, child.name, got, want)
				}
				if child.kind == "Secret" {
					secrets[u.GetLabels()[shardLabel]]++
				}
			}
		}
		for _, r := range replicas {
			scrape, err := f.scrapeMetrics(r.metrics)
			if err != nil {
				return false, err.Error()
			}
			widgets := metric(scrape, "polyop_shard_owned_objects", "ring", ringName, "kind", "Widget.e2e.polyop.dev/v1")
			cached := metric(scrape, "polyop_shard_owned_objects", "ring", ringName, "kind", "Secret.v1")
			if int(widgets) != labelled[r.id] || int(cached) != secrets[r.id] || labelled[r.id] == 0 {
				return false, fmt.Sprintf("%s caches %v Widgets and %v Secrets; %d and %d are labelled with it", r.id, widgets, cached, labelled[r.id], secrets[r.id])
			}
			if strings.Contains(scrape, `polyop_shard_owned_objects{kind="ConfigMap.v1"`) {
				return false, fmt.Sprintf("%s counts ConfigMaps as sharded, though the sidecar watches them", r.id)
			}
		}
		return true, ""
	})
}
