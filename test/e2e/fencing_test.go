package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// leaderMode is plain leader election, without sharding: the elected
// replica reconciles every object.
var leaderMode = shardingMode{name: "leader", leaderElect: true}

// fencingModes are the modes the fencing test pauses a replica in.
var fencingModes = []shardingMode{labelMode, serverMode, leaderMode}

// fencingReplicaIDs are the replica IDs a fencing test may start: the first
// replicas, and in leader mode those started again after a paused leader
// exits.
var fencingReplicaIDs = []string{"r0", "r1", "r2", "r3", "r4", "r5"}

// auditUser is the user replica id of a ring in mode runs as.
func auditUser(mode shardingMode, id string) string { return "fence-" + mode.name + "-" + id }

// auditUsers are the users whose writes the suite's API server audits.
func auditUsers() []string {
	var out []string
	for _, m := range fencingModes {
		for _, id := range fencingReplicaIDs {
			out = append(out, auditUser(m, id))
		}
	}
	return out
}

// The pause points of the fencing test.
const (
	// pauseBefore stops the replica's host and sidecar from outside, at
	// whatever point they are, as a frozen machine would.
	pauseBefore = "before"
	// pauseDuring stops the host while its sidecar computes a call's answer.
	pauseDuring = "during"
	// pauseAfter stops the host right after the sidecar answered, while it
	// reads the answer and makes its writes.
	pauseAfter = "after"
)

// pause is one pause of a replica, as the test saw it.
type pause struct {
	point  string
	victim string
	// user is the victim's user in the audit log.
	user string
	// stopped, resumed: when the test saw the replica stopped and resumed
	// it; rejoined: when the replica logged that it reconciles again (the
	// zero time for a replica that exited instead, as a leader does).
	stopped, resumed, rejoined time.Time
	// takenOver: when every object the victim had was reconciled, at a
	// newer generation, by another replica.
	takenOver time.Time
}

// Three host replicas in each sharding mode, and two with plain leader
// election, reconcile windows, each owning a ConfigMap that carries its
// window's generation, while a window changes every 100ms. One replica is
// paused past its lease three times — from outside (host and sidecar, as a
// frozen machine), during a call (its sidecar stops the host before
// answering) and between a call and its writes (right after the answer) —
// until another replica has taken its objects over and reconciled them at a
// newer generation, then resumed. The API server's audit log shows that the
// paused replica wrote nothing from its resumption until it had rejoined its
// ring with a fresh view (a leader, which loses its lease for good, exits
// without writing), that no ConfigMap and no status was ever written at an
// older generation than one written before it, and every window converges at
// its latest generation.
func TestAPausedReplicaWritesNothingFromAStaleView(t *testing.T) {
	t.Parallel()
	inEachMode(t, fencingModes, testPausedReplica)
}

func testPausedReplica(t *testing.T, mode shardingMode) {
	const n = 40
	f := newFixture(t)
	s := newShardRing(f, mode, "fence", 6*time.Second)
	s.n, s.children, s.quiet, s.audited = n, true, true, true
	freezeFile := func(id string) string { return filepath.Join(s.dir, id+".freeze") }
	s.sidecar = func(r *shardReplica, socket string) *testenv.Process {
		return s.testSidecar("--child-configmap", "--child-generation", "--freeze-pid-file", freezeFile(r.id))(r, socket)
	}
	replicas := 3
	if mode.name == leaderMode.name {
		replicas = 2
	}
	ids := fencingReplicaIDs
	var live []*shardReplica
	for range replicas {
		live = append(live, s.start(ids[0]))
		ids = ids[1:]
	}
	// In leader mode, the Events about the leader election's Lease are its
	// own (became leader, stopped leading), not about any object.
	fc := &fencingCheck{s: s, leaseEvents: s.name + ".polyop.dev."}
	for i := range n {
		f.create(f.window(s.window(i), nil))
	}
	fc.converged(live, "every window reconciled")

	ctx, stopBumping := context.WithCancel(context.Background())
	bumped := bumpWindows(ctx, f, s, 100*time.Millisecond)
	defer stopBumping()

	var pauses []pause
	for _, point := range []string{pauseBefore, pauseDuring, pauseAfter} {
		fc.shared(live)
		victim := fc.victim(live)
		p := pause{point: point, victim: victim.id, user: auditUser(mode, victim.id)}
		owned := fc.ownedBy(live, victim)
		atStop, frozeOn := fc.stop(victim, point, owned, freezeFile(victim.id))
		p.stopped = time.Now()
		fc.takenOver(victim, owned, atStop)
		p.takenOver = time.Now()

		resume(t, victim, point)
		p.resumed = time.Now()
		if frozeOn != "" {
			f.update(frozeOn, func(u *unstructured.Unstructured) {
				annotations := u.GetAnnotations()
				delete(annotations, "e2e.polyop.dev/freeze-host")
				u.SetAnnotations(annotations)
			}, false)
		}
		if mode.name == leaderMode.name {
			// Its lease is another's: it stops leading, and exits.
			if _, err := victim.host.Wait(2 * time.Minute); err != nil {
				t.Fatalf("the paused leader %s did not exit after another took its lease: %v", victim.id, err)
			}
			victim.sidecar.Stop()
			live = without(live, victim)
			live = append(live, s.start(ids[0]))
			ids = ids[1:]
		} else {
			p.rejoined = fc.rejoined(victim, p.resumed)
		}
		pauses = append(pauses, p)
		t.Logf("paused %s (%s a call): taken over %s after the pause; resumed; %s",
			p.victim, p.point, p.takenOver.Sub(p.stopped).Round(100*time.Millisecond), rejoinedAfter(p))
	}

	stopBumping()
	if err := <-bumped; err != nil {
		t.Fatal(err)
	}
	fc.converged(live, "every window reconciled at its latest generation after the pauses")
	fc.checkAudit(pauses)
	// A call a paused sidecar had in flight may go on computing after the
	// thaw beside the new owner's (its answer is discarded): such overlaps
	// of computation are counted, not failed.
	overlaps := 0
	if b, err := os.ReadFile(filepath.Join(s.overlaps, "overlaps.log")); err == nil {
		overlaps = strings.Count(string(b), "\n")
	}
	t.Logf("calls of one object in flight in two sidecars at once: %d", overlaps)
}

// rejoinedAfter says how long after it resumed the replica rejoined.
func rejoinedAfter(p pause) string {
	if p.rejoined.IsZero() {
		return "it exited, having lost its lease"
	}
	return fmt.Sprintf("rejoined %s after resuming", p.rejoined.Sub(p.resumed).Round(time.Millisecond))
}

// fencingCheck looks at the ring of a fencing test.
type fencingCheck struct {
	s *shardRing
	// leaseEvents starts the names of the Events about the leader
	// election's Lease.
	leaseEvents string
}

// shared waits until every replica of live owns windows (in leader mode,
// one leads): a replica that rejoined has its share back.
func (fc *fencingCheck) shared(live []*shardReplica) {
	t := fc.s.f.t
	t.Helper()
	if fc.s.mode.name == leaderMode.name {
		fc.s.leader(live)
		return
	}
	testenv.Eventually(t, 3*time.Minute, "every replica owning windows", func(ctx context.Context) error {
		windows, err := fc.windows(ctx)
		if err != nil {
			return err
		}
		owned := map[string]int{}
		for i := range windows {
			owned[fc.owner(live, &windows[i])]++
		}
		for _, r := range live {
			if owned[r.id] == 0 {
				return fmt.Errorf("%s owns none (owners %v)", r.id, owned)
			}
		}
		return nil
	})
}

// windows lists the ring's windows.
func (fc *fencingCheck) windows(ctx context.Context) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(windowGVK.GroupVersion().WithKind("MaintenanceWindowList"))
	if err := fc.s.f.c.List(ctx, list, client.InNamespace(fc.s.f.ns)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// owner is the replica of live that reconciles u: in a sharding mode its
// shard's, in leader mode the one whose sidecar last reconciled it.
func (fc *fencingCheck) owner(live []*shardReplica, u *unstructured.Unstructured) string {
	if fc.s.mode.name == leaderMode.name {
		return strings.TrimPrefix(readyMessage(u), "Reconciled by ")
	}
	return fc.s.owners(live)(u)
}

// converged waits until every window is reconciled at its generation by a
// replica of live (its shard's owner, in a sharding mode), and its ConfigMap
// carries that generation.
func (fc *fencingCheck) converged(live []*shardReplica, what string) {
	s := fc.s
	t := s.f.t
	t.Helper()
	ids := map[string]bool{}
	for _, r := range live {
		ids[r.id] = true
	}
	testenv.Eventually(t, 3*time.Minute, what, func(ctx context.Context) error {
		windows, err := fc.windows(ctx)
		if err != nil {
			return err
		}
		if len(windows) != s.n {
			return fmt.Errorf("%d of %d windows", len(windows), s.n)
		}
		for i := range windows {
			u := &windows[i]
			og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			by := strings.TrimPrefix(readyMessage(u), "Reconciled by ")
			switch {
			case og != u.GetGeneration():
				return fmt.Errorf("%s is at generation %d, reconciled at %d", u.GetName(), u.GetGeneration(), og)
			case !ids[by] || (s.mode.name != leaderMode.name && by != fc.owner(live, u)):
				return fmt.Errorf("%s was last reconciled by %q, which is not its live owner %q", u.GetName(), by, fc.owner(live, u))
			}
			cm := &corev1.ConfigMap{}
			if err := s.f.c.Get(ctx, client.ObjectKey{Namespace: s.f.ns, Name: u.GetName()}, cm); err != nil {
				return fmt.Errorf("the ConfigMap of %s: %w", u.GetName(), err)
			}
			if got := cm.Data["generation"]; got != strconv.FormatInt(u.GetGeneration(), 10) {
				return fmt.Errorf("the ConfigMap of %s carries generation %q, the window is at %d", u.GetName(), got, u.GetGeneration())
			}
		}
		return nil
	})
}

// victim is the replica to pause: in label mode one that does not lead (the
// leader runs the sharder), in server mode the first, in leader mode the
// leader.
func (fc *fencingCheck) victim(live []*shardReplica) *shardReplica {
	switch fc.s.mode.name {
	case labelMode.name:
		return fc.s.pickNonLeader(live)
	case leaderMode.name:
		return fc.s.leader(live)
	}
	return live[0]
}

// ownedBy names the windows r reconciles now.
func (fc *fencingCheck) ownedBy(live []*shardReplica, r *shardReplica) map[string]bool {
	t := fc.s.f.t
	t.Helper()
	windows, err := fc.windows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for i := range windows {
		if fc.s.mode.name == leaderMode.name || fc.owner(live, &windows[i]) == r.id {
			out[windows[i].GetName()] = true
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s owns no window", r.id)
	}
	return out
}

// stop pauses victim at point and returns the generation each window it
// owned had then, and the window whose call its sidecar stopped it at ("" for
// a pause from outside).
func (fc *fencingCheck) stop(victim *shardReplica, point string, owned map[string]bool, freezeFile string) (atStop map[string]int64, frozeOn string) {
	s := fc.s
	t := s.f.t
	t.Helper()
	switch point {
	case pauseBefore:
		for _, p := range []*testenv.Process{victim.sidecar, victim.host} {
			if err := p.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
	default:
		// The victim's sidecar stops its host at its next call for the
		// window (--freeze-pid-file): the window changes with the
		// annotation, so that a call comes.
		if err := os.WriteFile(freezeFile, []byte(strconv.Itoa(victim.host.Pid())), 0o600); err != nil {
			t.Fatal(err)
		}
		for w := range owned {
			frozeOn = w
			break
		}
		name := frozeOn
		s.f.update(name, func(u *unstructured.Unstructured) {
			annotations := u.GetAnnotations()
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations["e2e.polyop.dev/freeze-host"] = point
			u.SetAnnotations(annotations)
			_ = unstructured.SetNestedField(u.Object, fmt.Sprintf("%dm", time.Now().UnixNano()%100000+1), "spec", "duration")
		}, false)
		testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%s's sidecar stopping its host %s a call for %s", victim.id, point, name), func() (bool, string) {
			_, err := os.Stat(freezeFile)
			return os.IsNotExist(err), fmt.Sprintf("%s is still there", freezeFile)
		})
	}
	windows, err := fc.windows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	atStop = map[string]int64{}
	for i := range windows {
		if owned[windows[i].GetName()] {
			atStop[windows[i].GetName()] = windows[i].GetGeneration()
		}
	}
	return atStop, frozeOn
}

// takenOver waits until every window victim owned has been reconciled by
// another replica at a newer generation than it had when victim stopped:
// from then on, a write of the victim from its old view would roll it back.
func (fc *fencingCheck) takenOver(victim *shardReplica, owned map[string]bool, atStop map[string]int64) {
	t := fc.s.f.t
	t.Helper()
	testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("the windows of the paused %s reconciled at a newer generation by another replica", victim.id), func(ctx context.Context) error {
		windows, err := fc.windows(ctx)
		if err != nil {
			return err
		}
		waiting := 0
		var example string
		for i := range windows {
			u := &windows[i]
			if !owned[u.GetName()] {
				continue
			}
			og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			by := strings.TrimPrefix(readyMessage(u), "Reconciled by ")
			if by == victim.id || og <= atStop[u.GetName()] {
				waiting++
				example = fmt.Sprintf("%s: reconciled by %s at generation %d (%d at the pause)", u.GetName(), by, og, atStop[u.GetName()])
			}
		}
		if waiting > 0 {
			return fmt.Errorf("%d of %d, e.g. %s", waiting, len(owned), example)
		}
		return nil
	})
}

// resume resumes what stop paused.
func resume(t *testing.T, victim *shardReplica, point string) {
	t.Helper()
	procs := []*testenv.Process{victim.host}
	if point == pauseBefore {
		procs = append(procs, victim.sidecar)
	}
	for _, p := range procs {
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
}

// rejoinedLine is what a host logs once it reconciles again after its
// shard Lease lapsed (rejoin.Rejoiner).
const rejoinedLine = "view refreshed: reconciling again"

// rejoined waits until victim's host logs that it reconciles again, after
// resumed, and returns the time of that log line.
func (fc *fencingCheck) rejoined(victim *shardReplica, resumed time.Time) time.Time {
	t := fc.s.f.t
	t.Helper()
	var at time.Time
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%s rejoining its ring", victim.id), func() (bool, string) {
		out, err := os.ReadFile(filepath.Join(fc.s.dir, victim.id+".log"))
		if err != nil {
			return false, err.Error()
		}
		for line := range strings.SplitSeq(string(out), "\n") {
			if !strings.Contains(line, rejoinedLine) {
				continue
			}
			if ts, ok := logTime(line); ok && ts.After(resumed.Add(-time.Second)) && ts.After(at) {
				at = ts
			}
		}
		return !at.IsZero(), "no line saying so yet"
	})
	return at
}

// logTime reads the time a host's log line was written: the hosts of the
// fencing test log JSON with RFC 3339 times to the nanosecond
// (--zap-time-encoding rfc3339nano).
func logTime(line string) (time.Time, bool) {
	var l struct {
		TS string `json:"ts"`
	}
	if json.Unmarshal([]byte(line), &l) != nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, l.TS)
	return t, err == nil
}

// bumpWindows changes one window after the other, every interval, until ctx
// ends; the channel gets nil then, or the first error.
func bumpWindows(ctx context.Context, f *fixture, s *shardRing, interval time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-ticker.C:
			}
			name := s.window(i % s.n)
			for {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(windowGVK)
				err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, u)
				if err == nil {
					_ = unstructured.SetNestedField(u.Object, fmt.Sprintf("%dm", i+2), "spec", "duration")
					err = f.c.Update(ctx, u)
				}
				if ctx.Err() != nil {
					done <- nil
					return
				}
				if apierrors.IsConflict(err) {
					continue
				}
				if err != nil {
					done <- fmt.Errorf("changing %s: %w", name, err)
					return
				}
				break
			}
		}
	}()
	return done
}

// checkAudit reads the API server's audit log of the ring's replicas and
// fails the test if a paused replica wrote anything but its Lease between
// its resumption and its rejoining (or its exit), or if any ConfigMap or
// status of the ring's windows was written at an older generation than a
// write before it.
func (fc *fencingCheck) checkAudit(pauses []pause) {
	s := fc.s
	t := s.f.t
	t.Helper()
	events, err := env.AuditLog()
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]bool{}
	for _, id := range fencingReplicaIDs {
		users[auditUser(s.mode, id)] = true
	}
	var stale []string
	refused := map[string]int{}
	for _, e := range events {
		if !users[e.User] || e.Resource == "leases" || (e.Resource == "events" && strings.HasPrefix(e.Name, fc.leaseEvents)) {
			continue
		}
		if e.Namespace != s.f.ns && e.Resource != "events" {
			continue
		}
		for _, p := range pauses {
			if e.User != p.user || e.Received.Before(p.resumed) || (!p.rejoined.IsZero() && !e.Received.Before(p.rejoined)) {
				continue
			}
			if e.Succeeded() {
				stale = append(stale, fmt.Sprintf("paused %s: %s", p.point, e))
			} else {
				refused[p.point+" "+e.Resource]++
			}
		}
	}
	if len(stale) > 0 {
		t.Errorf("a paused replica wrote after it resumed, before it rejoined (%d writes):\n%s", len(stale), strings.Join(stale, "\n"))
	}
	t.Logf("writes of the paused replicas the API server refused between their resumption and their rejoining: %v", refused)

	// No write went back in generations, whoever made it.
	last := map[string]int64{}
	lastBy := map[string]string{}
	var rollbacks []string
	writes := 0
	// history keeps each object's writes, to show a rollback's.
	history := map[string][]string{}
	for _, e := range events {
		if !users[e.User] || e.Namespace != s.f.ns || !e.Succeeded() {
			continue
		}
		var key string
		var gen int64
		switch {
		case e.Resource == "configmaps" && e.Sub == "":
			key, gen = "ConfigMap "+e.Name, childGeneration(e.Body)
		case e.Resource == "maintenancewindows" && e.Sub == "status":
			key, gen = "status of "+e.Name, statusGeneration(e.Body)
		default:
			continue
		}
		if gen == 0 {
			continue
		}
		writes++
		history[key] = append(history[key], fmt.Sprintf("generation %d by %s at %s", gen, e.User, e.Received.Format(time.RFC3339Nano)))
		if gen < last[key] {
			h := history[key]
			rollbacks = append(rollbacks, fmt.Sprintf("%s written at generation %d by %s at %s, after generation %d by %s; its writes:\n\t%s",
				key, gen, e.User, e.Received.Format(time.RFC3339Nano), last[key], lastBy[key], strings.Join(h[max(0, len(h)-8):], "\n\t")))
		}
		if gen > last[key] {
			last[key], lastBy[key] = gen, e.User
		}
	}
	if writes == 0 {
		t.Fatal("the audit log holds no write of a ConfigMap or a status of the ring")
	}
	sort.Strings(rollbacks)
	if len(rollbacks) > 0 {
		t.Errorf("writes that rolled an object back to an older generation (%d of the audit log's %d writes of ConfigMaps and statuses):\n%s",
			len(rollbacks), writes, strings.Join(rollbacks, "\n"))
		return
	}
	t.Logf("the audit log's %d writes of ConfigMaps and statuses never went back in generations", writes)
}

// childGeneration is the generation a ConfigMap's apply carries.
func childGeneration(body json.RawMessage) int64 {
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if json.Unmarshal(body, &cm) != nil {
		return 0
	}
	g, _ := strconv.ParseInt(cm.Data["generation"], 10, 64)
	return g
}

// statusGeneration is the observedGeneration a status patch writes.
func statusGeneration(body json.RawMessage) int64 {
	var ops []struct {
		Path  string `json:"path"`
		Value struct {
			ObservedGeneration int64 `json:"observedGeneration"`
		} `json:"value"`
	}
	if json.Unmarshal(body, &ops) == nil {
		for _, op := range ops {
			if op.Path == "/status" {
				return op.Value.ObservedGeneration
			}
		}
	}
	var merge struct {
		Status struct {
			ObservedGeneration int64 `json:"observedGeneration"`
		} `json:"status"`
	}
	if json.Unmarshal(body, &merge) == nil {
		return merge.Status.ObservedGeneration
	}
	return 0
}
