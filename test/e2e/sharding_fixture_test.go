package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// shardReplica is one host replica of a sharding test, with its sidecar.
type shardReplica struct {
	id      string
	host    *testenv.Process
	metrics string
}

// shardRing is a sharding test's ring: its replicas, each a host process
// with a test sidecar of its own named after the ring, and the directory in
// which the sidecars hold a lock file per object while they reconcile it,
// so that any two reconciles of one object in flight at once are recorded.
type shardRing struct {
	f        *fixture
	name     string
	overlaps string
	replicas []*shardReplica
}

// startShardRing starts n replicas of ringName, host-0 to host-<n-1>, each
// host with the sharding flags hostArgs.
func (f *fixture) startShardRing(ringName string, n int, hostArgs ...string) *shardRing {
	f.t.Helper()
	dir := filepath.Dir(f.socket)
	r := &shardRing{f: f, name: ringName, overlaps: filepath.Join(dir, "overlaps")}
	if err := os.Mkdir(r.overlaps, 0o755); err != nil {
		f.t.Fatal(err)
	}
	for i := range n {
		rep := &shardReplica{id: fmt.Sprintf("host-%d", i), metrics: freePort(f.t)}
		socket := "unix://" + filepath.Join(dir, rep.id+".sock")
		f.startTestSidecar("--address", socket, "--name", ringName, "--log-file", filepath.Join(dir, rep.id+".jsonl"),
			"--delay", "20ms", "--overlap-dir", r.overlaps)
		rep.host = f.startHost(append([]string{
			"--sidecar-address", socket,
			"--cluster-address", "unix://" + filepath.Join(dir, rep.id+"-cluster.sock"),
			"--metrics-bind-address", rep.metrics, "--metrics-secure=false",
			"--shard-replica-id", rep.id,
		}, hostArgs...)...)
		rep.host.Name = rep.id
		r.replicas = append(r.replicas, rep)
	}
	return r
}

// without returns the replicas but dead.
func (r *shardRing) without(dead *shardReplica) []*shardReplica {
	var live []*shardReplica
	for _, rep := range r.replicas {
		if rep != dead {
			live = append(live, rep)
		}
	}
	return live
}

// awaitConverged waits until all n of the fixture's MaintenanceWindows are
// reconciled at generation gen, each assigned (by owner, which names the
// replica an object belongs to, "" for none) to one of live, and each live
// replica's cache holds exactly the objects assigned to it
// (polyop_shard_owned_objects).
func (r *shardRing) awaitConverged(live []*shardReplica, n int, gen int64, owner func(u *unstructured.Unstructured, live []*shardReplica) string, what string) {
	t := r.f.t
	t.Helper()
	testenv.Eventually(t, 3*time.Minute, what, func() (bool, string) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(windowGVK.GroupVersion().WithKind("MaintenanceWindowList"))
		if err := k8s.List(context.Background(), list, client.InNamespace(r.f.ns)); err != nil {
			return false, err.Error()
		}
		owned := map[string]int{}
		pending := 0
		for _, u := range list.Items {
			owned[owner(&u, live)]++
			if og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); phase(&u) != "Reconciled" || og != gen {
				pending++
			}
		}
		if len(list.Items) != n || pending > 0 {
			return false, fmt.Sprintf("%d objects, %d not reconciled at generation %d; owned %v", len(list.Items), pending, gen, owned)
		}
		total := 0
		for _, rep := range live {
			scrape, err := r.f.scrapeMetrics(rep.metrics)
			if err != nil {
				return false, err.Error()
			}
			cached := metric(scrape, "polyop_shard_owned_objects", "ring", r.name, "kind", "MaintenanceWindow.examples.polyop.dev/v1")
			if int(cached) != owned[rep.id] || owned[rep.id] == 0 {
				return false, fmt.Sprintf("%s caches %v objects, %d are its own (owned %v)", rep.id, cached, owned[rep.id], owned)
			}
			if share := metric(scrape, "polyop_shard_hash_space_share", "ring", r.name); share <= 0 {
				return false, fmt.Sprintf("%s owns a share %v of the hash space", rep.id, share)
			}
			total += owned[rep.id]
		}
		if total != n {
			return false, fmt.Sprintf("the live replicas own %d of %d objects: owned %v", total, n, owned)
		}
		return true, ""
	})
}

// checkNoOverlap fails the test if any object was reconciled by two
// replicas at once.
func (r *shardRing) checkNoOverlap() {
	r.f.t.Helper()
	if got, err := os.ReadFile(filepath.Join(r.overlaps, "overlaps.log")); err == nil {
		r.f.t.Fatalf("objects reconciled by two replicas at once:\n%s", got)
	}
}

// changeEveryWindow sets a new duration on the n MaintenanceWindows
// w000…, so that each is reconciled again at its next generation.
func (f *fixture) changeEveryWindow(n int, duration string) {
	f.t.Helper()
	for i := range n {
		f.update(fmt.Sprintf("w%03d", i), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, duration, "spec", "duration")
		}, false)
	}
}
