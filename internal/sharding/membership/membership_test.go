package membership

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/sharding"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"

	"github.com/polyop/polyop/internal/testenv"
)

// The integration tests run against a real API server, started the first
// time a test needs it and stopped by TestMain.
var shared testenv.Lazy

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// converge bounds every wait on the API server: generous, for a loaded
// machine.
const converge = 60 * time.Second

// controlPlane returns a clientset for the shared API server and a ring name
// of the test's own, so that tests share no Lease and no metric.
func controlPlane(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(shared.Get(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs, fmt.Sprintf("ring-%d", time.Now().UnixNano())
}

// running is a Runnable started by a test; stop ends it and waits for it.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, r interface{ Start(context.Context) error }) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- r.Start(ctx) }()
	t.Cleanup(func() { run.stop(t) })
	return run
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Errorf("ended with %v", err)
	}
}

// replica is a Member and a Source of one ring, as a sharded host runs them.
type replica struct {
	member         *Member
	source         *Source
	memberRun, src *running
}

func startReplica(t *testing.T, cs kubernetes.Interface, ringName, id string, opts MemberOptions) *replica {
	t.Helper()
	opts.Ring, opts.ReplicaID, opts.Namespace = ringName, id, "default"
	m, err := NewMember(cs.CoordinationV1(), opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSource(cs.CoordinationV1(), SourceOptions{Ring: ringName, Namespace: "default", ReplicaID: id})
	if err != nil {
		t.Fatal(err)
	}
	return &replica{member: m, source: s, memberRun: start(t, m), src: start(t, s)}
}

// awaitMembers waits until every replica's Source sees exactly want.
func awaitMembers(t *testing.T, want string, replicas ...*replica) {
	t.Helper()
	for _, r := range replicas {
		testenv.Eventually(t, converge, fmt.Sprintf("%s's ring of %s", r.member.opts.ReplicaID, want), func() (bool, string) {
			cur := r.source.Current()
			return cur != nil && members(cur) == want, members(cur)
		})
	}
}

func TestThreeMembersOfARingAgreeOnEveryOwner(t *testing.T) {
	t.Parallel()
	cs, ringName := controlPlane(t)
	a := startReplica(t, cs, ringName, "host-a", MemberOptions{})
	b := startReplica(t, cs, ringName, "host-b", MemberOptions{})
	c := startReplica(t, cs, ringName, "host-c", MemberOptions{})
	awaitMembers(t, "host-a,host-b,host-c", a, b, c)

	for _, r := range []*replica{a, b, c} {
		if !r.member.Holding() {
			t.Errorf("%s is not Holding: %v", r.member.opts.ReplicaID, r.member.Check(nil))
		}
	}
	shares := 0.0
	for i := 0; i < 1000; i++ {
		uid := uuid.NewUUID()
		owner := a.source.Current().OwnerOf(uid)
		if b.source.Current().OwnerOf(uid) != owner || c.source.Current().OwnerOf(uid) != owner {
			t.Fatalf("UID %s: owners %s, %s, %s", uid, owner, b.source.Current().OwnerOf(uid), c.source.Current().OwnerOf(uid))
		}
	}
	for _, m := range []string{"host-a", "host-b", "host-c"} {
		shares += Share(a.source.Current(), m)
	}
	if shares < 0.999999 || shares > 1.000001 {
		t.Errorf("the members' shares add up to %v, want 1", shares)
	}
	if got := testutil.ToFloat64(membersGauge.WithLabelValues(ringName)); got != 3 {
		t.Errorf("polyop_shard_members{ring=%q} = %v, want 3", ringName, got)
	}
	if got := testutil.ToFloat64(shareGauge.WithLabelValues(ringName)); got < 0.2 || got > 0.5 {
		t.Errorf("polyop_shard_hash_space_share{ring=%q} = %v, want about 1/3", ringName, got)
	}
}

func TestAMemberThatStopsLeavesTheRingAtOnce(t *testing.T) {
	t.Parallel()
	cs, ringName := controlPlane(t)
	// Leases ten times longer than the wait: a member seen gone has been
	// released, not expired.
	opts := MemberOptions{LeaseDuration: 10 * converge}
	a := startReplica(t, cs, ringName, "host-a", opts)
	b := startReplica(t, cs, ringName, "host-b", opts)
	c := startReplica(t, cs, ringName, "host-c", opts)
	awaitMembers(t, "host-a,host-b,host-c", a, b, c)
	changesBefore := testutil.ToFloat64(ringChanges.WithLabelValues(ringName))

	c.memberRun.stop(t)
	if c.member.Holding() {
		t.Error("a stopped Member is still Holding")
	}
	awaitMembers(t, "host-a,host-b", a, b)
	if _, err := cs.CoordinationV1().Leases("default").Get(context.Background(), c.member.LeaseName(), metav1.GetOptions{}); err == nil {
		t.Error("the stopped Member's Lease is still there")
	}
	if got := testutil.ToFloat64(ringChanges.WithLabelValues(ringName)); got <= changesBefore {
		t.Errorf("polyop_shard_ring_changes_total did not grow (%v) when a member left", got)
	}
}

func TestAMemberThatDiesLeavesTheRingWhenItsLeaseExpires(t *testing.T) {
	t.Parallel()
	cs, ringName := controlPlane(t)
	opts := MemberOptions{LeaseDuration: 2 * time.Second}
	a := startReplica(t, cs, ringName, "host-a", opts)
	b := startReplica(t, cs, ringName, "host-b", opts)
	crash := opts
	crash.KeepLeaseOnStop = true // stops renewing, as a replica killed would
	c := startReplica(t, cs, ringName, "host-c", crash)
	awaitMembers(t, "host-a,host-b,host-c", a, b, c)

	c.memberRun.stop(t)
	awaitMembers(t, "host-a,host-b", a, b)
	seen := time.Now()
	l, err := cs.CoordinationV1().Leases("default").Get(context.Background(), c.member.LeaseName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the dead Member's Lease: %v", err)
	}
	leases := Leases([]coordinationv1.Lease{*l})
	if seen.Before(leases[0].Expires) {
		t.Errorf("host-c left the ring at %s, before its Lease expired at %s", seen, leases[0].Expires)
	}
	for _, r := range []*replica{a, b} {
		if !r.member.Holding() {
			t.Errorf("%s is not Holding: %v", r.member.opts.ReplicaID, r.member.Check(nil))
		}
	}
}

func TestADeletedLeaseIsMadeAgain(t *testing.T) {
	t.Parallel()
	cs, ringName := controlPlane(t)
	a := startReplica(t, cs, ringName, "host-a", MemberOptions{LeaseDuration: 3 * time.Second})
	awaitMembers(t, "host-a", a)
	leases := cs.CoordinationV1().Leases("default")
	ctx := context.Background()
	old, err := leases.Get(ctx, a.member.LeaseName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := leases.Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, converge, "the Lease made again", func(ctx context.Context) error {
		l, err := leases.Get(ctx, old.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.UID == old.UID || *l.Spec.HolderIdentity != "host-a" || l.Labels[sharding.RingLabel] != ringName {
			return fmt.Errorf("uid %s (was %s), holder %s, labels %v", l.UID, old.UID, *l.Spec.HolderIdentity, l.Labels)
		}
		return nil
	})
	awaitMembers(t, "host-a", a)
}

func TestLeasesOfAnotherRingAreIgnored(t *testing.T) {
	t.Parallel()
	cs, ringName := controlPlane(t)
	other := startReplica(t, cs, ringName+"-other", "host-x", MemberOptions{})
	awaitMembers(t, "host-x", other)
	// The other ring's Lease exists before this ring's Source starts, and
	// while it publishes its rings.
	a := startReplica(t, cs, ringName, "host-a", MemberOptions{})
	awaitMembers(t, "host-a", a)
	b := startReplica(t, cs, ringName, "host-b", MemberOptions{})
	awaitMembers(t, "host-a,host-b", a, b)
	awaitMembers(t, "host-x", other)
}

// A Member publishes the ring it adopted in its Lease, and keeps it there
// through its renewals; a Source reads it back, from the API server.
func TestAMemberPublishesTheRingItAdopted(t *testing.T) {
	t.Parallel()
	cs, ringName := controlPlane(t)
	a := startReplica(t, cs, ringName, "a", MemberOptions{LeaseDuration: 3 * time.Second, RenewInterval: 500 * time.Millisecond, RenewDeadline: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), converge)
	defer cancel()
	if err := a.member.Publish(ctx, "0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	lease, err := cs.CoordinationV1().Leases("default").Get(ctx, a.member.LeaseName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lease.Annotations[sharding.AdoptedRingAnnotation]; got != "0123456789abcdef" {
		t.Errorf("the Lease's %s is %q once Publish returned", sharding.AdoptedRingAnnotation, got)
	}
	renewed := lease.Spec.RenewTime.Time
	testenv.Eventually(t, converge, "a renewal keeping the adopted ring", func(ctx context.Context) error {
		leases, err := a.source.ReadLeases(ctx)
		if err != nil {
			return err
		}
		if len(leases) != 1 || !leases[0].RenewTime.After(renewed) {
			return fmt.Errorf("leases %+v, not renewed since %s", leases, renewed)
		}
		if leases[0].AdoptedRing != "0123456789abcdef" {
			return fmt.Errorf("the renewed Lease shows the adopted ring %q", leases[0].AdoptedRing)
		}
		return nil
	})
}
