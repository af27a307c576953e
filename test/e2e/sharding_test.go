package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/sharding"
	"github.com/polyop/polyop/internal/testenv"
)

// shardReplica is one host replica of the sharding test, with its sidecar.
type shardReplica struct {
	id      string
	host    *testenv.Process
	metrics string
}

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
	dir := filepath.Dir(f.socket)
	overlaps := filepath.Join(dir, "overlaps")
	if err := os.Mkdir(overlaps, 0o755); err != nil {
		t.Fatal(err)
	}
	shardLabel := sharding.ShardLabel(ringName)

	replicas := make([]*shardReplica, 3)
	for i := range replicas {
		r := &shardReplica{id: fmt.Sprintf("host-%d", i), metrics: freePort(t)}
		socket := "unix://" + filepath.Join(dir, r.id+".sock")
		f.startTestSidecar("--address", socket, "--name", ringName, "--log-file", filepath.Join(dir, r.id+".jsonl"),
			"--delay", "20ms", "--overlap-dir", overlaps)
		r.host = f.startHost(
			"--sidecar-address", socket,
			"--cluster-address", "unix://"+filepath.Join(dir, r.id+"-cluster.sock"),
			"--metrics-bind-address", r.metrics, "--metrics-secure=false",
			"--leader-elect", "--leader-election-namespace", f.ns,
			"--leader-election-lease-duration", "6s", "--leader-election-renew-deadline", "4s", "--leader-election-retry-period", "1s",
			"--sharding", "labels", "--shard-replica-id", r.id, "--shard-lease-duration", leaseDuration.String(),
		)
		r.host.Name = r.id
		replicas[i] = r
	}

	for i := range n {
		f.create(f.window(fmt.Sprintf("w%03d", i), nil))
	}

	// converged waits until every object is labelled with one of live and
	// reconciled at generation gen, and each live replica's cache holds
	// exactly the objects labelled with it.
	converged := func(live []*shardReplica, gen int64, what string) {
		t.Helper()
		testenv.Eventually(t, 3*time.Minute, what, func() (bool, string) {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(windowGVK.GroupVersion().WithKind("MaintenanceWindowList"))
			if err := k8s.List(context.Background(), list, client.InNamespace(f.ns)); err != nil {
				return false, err.Error()
			}
			labelled := map[string]int{}
			pending := 0
			for _, u := range list.Items {
				labelled[u.GetLabels()[shardLabel]]++
				if og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); phase(&u) != "Reconciled" || og != gen {
					pending++
				}
			}
			if len(list.Items) != n || pending > 0 {
				return false, fmt.Sprintf("%d objects, %d not reconciled at generation %d; labelled %v", len(list.Items), pending, gen, labelled)
			}
			total := 0
			for _, r := range live {
				scrape, err := f.scrapeMetrics(r.metrics)
				if err != nil {
					return false, err.Error()
				}
				cached := metric(scrape, "polyop_shard_owned_objects", "ring", ringName, "kind", "MaintenanceWindow.examples.polyop.dev/v1")
				if int(cached) != labelled[r.id] || labelled[r.id] == 0 {
					return false, fmt.Sprintf("%s caches %v objects, %d are labelled with it (labelled %v)", r.id, cached, labelled[r.id], labelled)
				}
				if share := metric(scrape, "polyop_shard_hash_space_share", "ring", ringName); share <= 0 {
					return false, fmt.Sprintf("%s owns a share %v of the hash space", r.id, share)
				}
				total += labelled[r.id]
			}
			if total != n {
				return false, fmt.Sprintf("the live replicas own %d of %d objects: labelled %v", total, n, labelled)
			}
			return true, ""
		})
	}
	converged(replicas, 1, "every object reconciled, each replica caching exactly its share")
	noOverlap := func() {
		t.Helper()
		if got, err := os.ReadFile(filepath.Join(overlaps, "overlaps.log")); err == nil {
			t.Fatalf("objects reconciled by two replicas at once:\n%s", got)
		}
	}
	noOverlap()

	// Kill a replica that does not lead (the leader runs the sharder), then
	// change every object: the dead replica's objects must reach the others
	// once its Lease expires, and be reconciled there.
	var victim *shardReplica
	for _, r := range replicas {
		if !strings.Contains(r.host.Output(), "Successfully acquired lease") {
			victim = r
			break
		}
	}
	killed := time.Now()
	victim.host.Kill()
	var live []*shardReplica
	for _, r := range replicas {
		if r != victim {
			live = append(live, r)
		}
	}
	for i := range n {
		f.update(fmt.Sprintf("w%03d", i), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "2h", "spec", "duration")
		}, false)
	}
	converged(live, 2, fmt.Sprintf("every object reconciled again after %s died, by the two others", victim.id))
	t.Logf("every object reconciled again %s after %s was killed (its Lease lasts %s)", time.Since(killed).Round(100*time.Millisecond), victim.id, leaseDuration)
	noOverlap()
}

// Each child a sharded replica applies carries its controller's shard label,
// so the child informers of the owner select it: the Secrets (owned, and not
// watched) are cached by the replica that owns their Widget only; the
// ConfigMaps, which the sidecar also watches, are labelled too but cached
// whole.
func TestShardedReplicasLabelTheChildrenTheyApply(t *testing.T) {
	t.Parallel()
	const (
		n        = 30
		ringName = "shardchildren"
	)
	f := newFixture(t)
	dir := filepath.Dir(f.socket)
	shardLabel := sharding.ShardLabel(ringName)
	replicas := make([]*shardReplica, 2)
	for i := range replicas {
		r := &shardReplica{id: fmt.Sprintf("child-host-%d", i), metrics: freePort(t)}
		socket := "unix://" + filepath.Join(dir, r.id+".sock")
		f.start("sidecar", childSidecarBin, "--address", socket, "--name", ringName, "--log-file", filepath.Join(dir, r.id+".jsonl"))
		r.host = f.startHost(
			"--sidecar-address", socket,
			"--cluster-address", "unix://"+filepath.Join(dir, r.id+"-cluster.sock"),
			"--metrics-bind-address", r.metrics, "--metrics-secure=false",
			"--leader-elect", "--leader-election-namespace", f.ns,
			"--leader-election-lease-duration", "6s", "--leader-election-renew-deadline", "4s", "--leader-election-retry-period", "1s",
			"--sharding", "labels", "--shard-replica-id", r.id, "--shard-lease-duration", "6s",
		)
		replicas[i] = r
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
			owner := w.GetLabels()[shardLabel]
			owners[w.GetName()] = owner
			labelled[owner]++
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
