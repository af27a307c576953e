package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/sharding"
	"github.com/polyop/polyop/internal/sharding/ring"
	"github.com/polyop/polyop/internal/testenv"
)

// shardingMode is one way the replicas of a sharding test select their
// share. The suite's API server runs with every feature gate a mode needs
// (ShardedListAndWatch).
type shardingMode struct {
	name     string
	hostArgs []string
	// leaderElect says the replicas run leader election: label mode's
	// leader runs the sharder.
	leaderElect bool
	// byRing says the objects carry no shard label: each belongs to the
	// member the ring of the live replicas gives its UID (server mode).
	byRing bool
}

// labelMode is --sharding=labels: the sharder labels each object with its
// owner, and each replica's informers select their label.
var labelMode = shardingMode{name: "labels", hostArgs: []string{"--sharding", "labels"}, leaderElect: true}

// serverMode is --sharding=server: each replica's informers list and watch
// the ranges of the hash space the ring gives it, through the API server's
// sharded list and watch; no label, no sharder, no leader.
var serverMode = shardingMode{name: "server", hostArgs: []string{"--sharding", "server"}, byRing: true}

// shardingModes are the modes the sharding tests that take one run in.
var shardingModes = []shardingMode{labelMode, serverMode}

// inEveryShardingMode runs test once per sharding mode, as parallel subtests
// named after the modes.
func inEveryShardingMode(t *testing.T, test func(*testing.T, shardingMode)) {
	t.Helper()
	inEachMode(t, shardingModes, test)
}

// inEachMode runs test once per mode of modes, as parallel subtests named
// after the modes.
func inEachMode(t *testing.T, modes []shardingMode, test func(*testing.T, shardingMode)) {
	t.Helper()
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			test(t, mode)
		})
	}
}

// shardRing is the host replicas of one ring, each with its own sidecar, in
// one fixture's namespace, and the MaintenanceWindows w0000… they share.
type shardRing struct {
	f    *fixture
	mode shardingMode
	name string
	// label is the objects' shard label.
	label         string
	leaseDuration time.Duration
	dir           string
	// overlaps is the directory where the sidecars hold a lock file per
	// object while they reconcile it (testsidecar's --overlap-dir).
	overlaps string
	// sidecar starts replica r's sidecar on socket.
	sidecar func(r *shardReplica, socket string) *testenv.Process
	// quiet sends the processes' output to files in dir rather than to
	// the test's log (a failed test logs their tails).
	quiet bool
	// n is how many MaintenanceWindows the test creates (window names them).
	n int
	// children says that each window has a ConfigMap child of its name
	// (testsidecar --child-configmap), which converged checks too.
	children bool
	// pollInterval is how often converged lists the objects.
	pollInterval time.Duration
	// audited runs each replica's host as a user of its own (auditUser),
	// whose writes the API server's audit log records.
	audited bool
}

// shardReplica is one host replica of a ring, with its sidecar.
type shardReplica struct {
	id      string
	host    *testenv.Process
	sidecar *testenv.Process
	metrics string
	// callLog is its sidecar's call log.
	callLog string
}

func newShardRing(f *fixture, mode shardingMode, name string, leaseDuration time.Duration) *shardRing {
	f.t.Helper()
	dir := filepath.Dir(f.socket)
	s := &shardRing{
		f: f, mode: mode, name: name, label: sharding.ShardLabel(name), leaseDuration: leaseDuration,
		dir: dir, overlaps: filepath.Join(dir, "overlaps"), pollInterval: testenv.PollInterval,
	}
	if err := os.Mkdir(s.overlaps, 0o755); err != nil {
		f.t.Fatal(err)
	}
	return s
}

// testSidecar starts test/testsidecar as a replica's sidecar: named after the
// ring, logging its calls, recording overlaps, naming its replica in the
// status it writes (--instance), with args added.
func (s *shardRing) testSidecar(args ...string) func(r *shardReplica, socket string) *testenv.Process {
	return func(r *shardReplica, socket string) *testenv.Process {
		return s.process(r.id+"-sidecar", testSidecarBin, append([]string{
			"--address", socket, "--name", s.name, "--log-file", r.callLog, "--update-filters", "generation",
			"--overlap-dir", s.overlaps, "--instance", r.id,
		}, args...)...)
	}
}

// start starts a replica named id: its sidecar, and a host in the ring's mode
// with a short lease (and, in a mode with leader election, a leader
// election's lease as long).
func (s *shardRing) start(id string) *shardReplica {
	s.f.t.Helper()
	r := &shardReplica{id: id, metrics: freePort(s.f.t), callLog: filepath.Join(s.dir, id+".jsonl")}
	socket := "unix://" + filepath.Join(s.dir, id+".sock")
	r.sidecar = s.sidecar(r, socket)
	lease := s.leaseDuration.String()
	args := s.f.hostArgs(append([]string{
		"--sidecar-address", socket,
		"--cluster-address", "unix://" + filepath.Join(s.dir, id+"-cluster.sock"),
		"--metrics-bind-address", r.metrics, "--metrics-secure=false",
		// The ring's Leases live in the leader election's namespace.
		"--leader-election-namespace", s.f.ns,
		"--shard-replica-id", id, "--shard-lease-duration", lease,
	}, s.mode.hostArgs...)...)
	if s.mode.leaderElect {
		args = append(args, "--leader-elect",
			"--leader-election-lease-duration", lease, "--leader-election-renew-deadline", (s.leaseDuration * 2 / 3).String(),
			"--leader-election-retry-period", "1s")
	}
	if s.quiet {
		args = append(args, "--zap-log-level", "info")
	}
	if s.audited {
		kubeconfig, err := env.AddUser(auditUser(s.mode, id))
		if err != nil {
			s.f.t.Fatal(err)
		}
		// Its log's times are compared with the audit log's.
		args = append(args, "--kubeconfig", kubeconfig, "--zap-time-encoding", "rfc3339nano")
	}
	r.host = s.process(id, hostBin, args...)
	return r
}

// process starts bin, its output in the test's log or, quiet, in a file.
func (s *shardRing) process(name, bin string, args ...string) *testenv.Process {
	t := s.f.t
	t.Helper()
	if !s.quiet {
		return s.f.start(name, bin, args...)
	}
	p, err := testenv.StartProcessWith(name, bin, args, testenv.ProcessOptions{LogPath: filepath.Join(s.dir, name+".log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("the last lines of %s:\n%s", name, testenv.Tail(p.Output(), 30))
			keepLog(t, name, p.Output())
		}
	})
	return p
}

// keepLog writes a failed test's process output into $POLYOP_E2E_LOG_DIR,
// when it is set, for a look at more than its last lines.
func keepLog(t *testing.T, name, output string) {
	dir := os.Getenv("POLYOP_E2E_LOG_DIR")
	if dir == "" {
		return
	}
	path := filepath.Join(dir, strings.NewReplacer("/", "_").Replace(t.Name())+"-"+name+".log")
	if err := os.WriteFile(path, []byte(output), 0o600); err != nil {
		t.Logf("keeping the log of %s: %v", name, err)
		return
	}
	t.Logf("the whole log of %s is in %s", name, path)
}

// window is the name of the i-th MaintenanceWindow.
func (s *shardRing) window(i int) string { return fmt.Sprintf("w%04d", i) }

// owners returns the function that names the replica an object belongs to
// while live are the live replicas: in label mode its shard label; in server
// mode, where nothing labels the objects, the owner of its UID in the ring of
// the live replicas (an object that carries a shard label there is named
// "labelled <value>", which no replica is).
func (s *shardRing) owners(live []*shardReplica) func(u *unstructured.Unstructured) string {
	if !s.mode.byRing {
		return func(u *unstructured.Unstructured) string { return u.GetLabels()[s.label] }
	}
	ids := make([]string, len(live))
	for i, r := range live {
		ids[i] = r.id
	}
	rg := ring.New(ids, 0)
	return func(u *unstructured.Unstructured) string {
		if v, labelled := u.GetLabels()[s.label]; labelled {
			return "labelled " + v
		}
		return rg.OwnerOf(u.GetUID())
	}
}

// shardCounts is what converged saw: the objects that belong to each replica
// (labelled with it, in label mode), and the objects and children each
// replica's cache holds.
type shardCounts struct {
	owned          map[string]int
	cached         map[string]float64
	cachedChildren map[string]float64
}

// converged waits until every window belongs to one of live (by the mode's
// owners), is reconciled at generation gen by that replica (its sidecar names
// itself in the Ready condition), and each live replica's cache holds exactly
// the windows that belong to it (and, with children, their ConfigMaps, which
// carry the shard label of their window's replica). It returns what it saw
// last.
func (s *shardRing) converged(live []*shardReplica, gen int64, what string) shardCounts {
	t := s.f.t
	t.Helper()
	var counts shardCounts
	// Generous: the objects move and converge at the pace of a loaded
	// machine's API server.
	timeout := 3*time.Minute + time.Duration(s.n)*100*time.Millisecond
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), s.pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		for _, r := range live {
			if r.host.Exited() {
				return false, fmt.Errorf("%w; its last lines:\n%s", r.host.ExitError(), testenv.Tail(r.host.Output(), 30))
			}
		}
		ok, seen, c := s.check(ctx, live, gen)
		if ctx.Err() == nil {
			// Not what a look cut short by the deadline saw.
			last, counts = seen, c
		}
		return ok, nil
	})
	switch {
	case wait.Interrupted(err):
		t.Fatalf("%s: not true within %s; last seen: %s", what, timeout, last)
	case err != nil:
		t.Fatalf("%s: %v", what, err)
	}
	return counts
}

// check is one look of converged.
func (s *shardRing) check(ctx context.Context, live []*shardReplica, gen int64) (ok bool, seen string, counts shardCounts) {
	counts = shardCounts{owned: map[string]int{}, cached: map[string]float64{}, cachedChildren: map[string]float64{}}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(windowGVK.GroupVersion().WithKind("MaintenanceWindowList"))
	if err := s.f.c.List(ctx, list, client.InNamespace(s.f.ns)); err != nil {
		return false, err.Error(), counts
	}
	ownerOf := s.owners(live)
	owners := make(map[string]string, len(list.Items))
	pending, foreign := 0, 0
	var example string
	for i := range list.Items {
		u := &list.Items[i]
		owner := ownerOf(u)
		owners[u.GetName()] = owner
		counts.owned[owner]++
		og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		switch {
		case phase(u) != "Reconciled" || og != gen:
			pending++
		case readyMessage(u) != "Reconciled by "+owner:
			foreign++
			example = fmt.Sprintf("%s belongs to %q, its status says %q", u.GetName(), owner, readyMessage(u))
		}
	}
	if len(list.Items) != s.n || pending > 0 || foreign > 0 {
		return false, fmt.Sprintf("%d objects, %d not reconciled at generation %d, %d last reconciled by another replica than their owner (%s); owned %v",
			len(list.Items), pending, gen, foreign, example, counts.owned), counts
	}
	childLabelled := map[string]int{}
	if s.children {
		cms := &corev1.ConfigMapList{}
		if err := s.f.c.List(ctx, cms, client.InNamespace(s.f.ns)); err != nil {
			return false, err.Error(), counts
		}
		children := 0
		for _, cm := range cms.Items {
			owner, ok := owners[cm.Name]
			if !ok {
				continue
			}
			children++
			if got := cm.Labels[s.label]; got != owner {
				return false, fmt.Sprintf("ConfigMap %s is labelled %q, its window belongs to %q", cm.Name, got, owner), counts
			}
			childLabelled[owner]++
		}
		if children != s.n {
			return false, fmt.Sprintf("%d of %d windows have their ConfigMap", children, s.n), counts
		}
	}
	total := 0
	for _, r := range live {
		scrape, err := s.f.scrapeMetrics(r.metrics)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", r.id, err), counts
		}
		cached := metric(scrape, "polyop_shard_owned_objects", "ring", s.name, "kind", "MaintenanceWindow.examples.polyop.dev/v1")
		counts.cached[r.id] = cached
		if int(cached) != counts.owned[r.id] || counts.owned[r.id] == 0 {
			return false, fmt.Sprintf("%s caches %v objects, %d are its own (owned %v)", r.id, cached, counts.owned[r.id], counts.owned), counts
		}
		if s.children {
			children := metric(scrape, "polyop_shard_owned_objects", "ring", s.name, "kind", "ConfigMap.v1")
			counts.cachedChildren[r.id] = children
			if int(children) != childLabelled[r.id] {
				return false, fmt.Sprintf("%s caches %v ConfigMaps, %d are labelled with it", r.id, children, childLabelled[r.id]), counts
			}
		}
		if share := metric(scrape, "polyop_shard_hash_space_share", "ring", s.name); share <= 0 {
			return false, fmt.Sprintf("%s owns a share %v of the hash space", r.id, share), counts
		}
		total += counts.owned[r.id]
	}
	if total != s.n {
		return false, fmt.Sprintf("the live replicas own %d of %d objects: owned %v", total, s.n, counts.owned), counts
	}
	return true, "", counts
}

// readyMessage is the message of u's Ready condition.
func readyMessage(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			msg, _ := m["message"].(string)
			return msg
		}
	}
	return ""
}

// noOverlap fails the test if any sidecar recorded a reconcile of an object
// in flight in another one.
func (s *shardRing) noOverlap() {
	s.f.t.Helper()
	if got, err := os.ReadFile(filepath.Join(s.overlaps, "overlaps.log")); err == nil {
		s.f.t.Fatalf("objects reconciled by two replicas at once:\n%s", got)
	}
}

// leader waits until exactly one of live leads (runs the sharder), and
// returns it. Only in a mode with leader election.
func (s *shardRing) leader(live []*shardReplica) *shardReplica {
	s.f.t.Helper()
	var leader *shardReplica
	testenv.Eventually(s.f.t, 2*time.Minute, "one replica leads", func() (bool, string) {
		var leaders []string
		leader = nil
		for _, r := range live {
			scrape, err := s.f.scrapeMetrics(r.metrics)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", r.id, err)
			}
			if metric(scrape, "leader_election_master_status") == 1 {
				leader = r
				leaders = append(leaders, r.id)
			}
		}
		return len(leaders) == 1, fmt.Sprintf("leaders %v", leaders)
	})
	return leader
}

// shardCall is a line of a sharded sidecar's call log.
type shardCall struct {
	Instance   string `json:"instance"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
}

// reconciledBy reads every replica's call log: for each object and
// generation, the replicas that reconciled it, and how many times.
func (s *shardRing) reconciledBy(replicas []*shardReplica) map[string]map[int64]map[string]int {
	t := s.f.t
	t.Helper()
	out := map[string]map[int64]map[string]int{}
	for _, r := range replicas {
		file, err := os.Open(r.callLog)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			var c shardCall
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil || c.Namespace != s.f.ns || c.Generation == 0 {
				continue // a line being written, or a reconcile of an object gone
			}
			if out[c.Name] == nil {
				out[c.Name] = map[int64]map[string]int{}
			}
			if out[c.Name][c.Generation] == nil {
				out[c.Name][c.Generation] = map[string]int{}
			}
			out[c.Name][c.Generation][c.Instance]++
		}
		_ = file.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// logShares logs each live replica's share of the windows and of their
// children, and its host's resident memory.
func (s *shardRing) logShares(what string, live []*shardReplica, counts shardCounts) {
	t := s.f.t
	t.Helper()
	var parts []string
	for _, r := range live {
		part := fmt.Sprintf("%s caches %v windows (%.1f%%)", r.id, counts.cached[r.id], 100*counts.cached[r.id]/float64(s.n))
		if s.children {
			part += fmt.Sprintf(" and %v ConfigMaps (%.1f%%)", counts.cachedChildren[r.id], 100*counts.cachedChildren[r.id]/float64(s.n))
		}
		if rss := vmRSS(r.host.Pid()); rss != "" {
			part += ", host RSS " + rss
		}
		parts = append(parts, part)
	}
	sort.Strings(parts)
	t.Logf("%s: %s", what, strings.Join(parts, "; "))
}

// vmRSS is the resident memory of process pid (VmRSS in /proc), or "" where
// there is no /proc.
func vmRSS(pid int) string {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if fields := strings.Fields(rest); len(fields) == 2 && fields[1] == "kB" {
				if kb, err := strconv.Atoi(fields[0]); err == nil {
					return fmt.Sprintf("%.0f MiB", float64(kb)/1024)
				}
			}
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// pickNonLeader returns a replica of live that does not lead, once one
// leads; in a mode without leader election, the first.
func (s *shardRing) pickNonLeader(live []*shardReplica) *shardReplica {
	s.f.t.Helper()
	var leader *shardReplica
	if s.mode.leaderElect {
		leader = s.leader(live)
	}
	for _, r := range live {
		if r != leader {
			return r
		}
	}
	s.f.t.Fatal("no replica but the leader")
	return nil
}

// changeEveryWindow sets a new duration on every window, so that each is
// reconciled again at its next generation.
func (s *shardRing) changeEveryWindow(duration string) {
	s.f.t.Helper()
	for i := range s.n {
		s.f.update(s.window(i), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, duration, "spec", "duration")
		}, false)
	}
}

// without returns replicas without r.
func without(replicas []*shardReplica, r *shardReplica) []*shardReplica {
	var out []*shardReplica
	for _, x := range replicas {
		if x != r {
			out = append(out, x)
		}
	}
	return out
}
