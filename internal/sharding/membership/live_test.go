package membership

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/sharding"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/polyop/polyop/internal/sharding/ring"
	"github.com/polyop/polyop/internal/testenv"
)

var t0 = time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)

// lease is a Lease of ring held by holder, renewed at renewed for seconds.
func lease(ringName, holder string, renewed time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName(ringName, holder), Namespace: "ns", Labels: map[string]string{sharding.RingLabel: ringName}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			RenewTime:            &metav1.MicroTime{Time: renewed},
			LeaseDurationSeconds: ptr.To(seconds),
		},
	}
}

// fakeLeases is a fake clientset's Leases: a Source's informer, given them,
// lists and watches, as informers of the fake clientset do, since the fake
// serves no watch lists (IsWatchListSemanticsUnSupported).
type fakeLeases struct{ *fake.Clientset }

func (f fakeLeases) Leases(namespace string) coordinationv1client.LeaseInterface {
	return f.CoordinationV1().Leases(namespace)
}

func TestLiveMembers(t *testing.T) {
	t.Parallel()
	noHolder := lease("r", "x", t0, 10)
	noHolder.Spec.HolderIdentity = nil
	noRenewal := lease("r", "y", t0, 10)
	noRenewal.Spec.RenewTime = nil
	for name, tc := range map[string]struct {
		leases   []*coordinationv1.Lease
		now      time.Time
		want     string
		wantNext time.Time
	}{
		"if every lease was renewed within its duration, every holder is live, sorted": {
			leases:   []*coordinationv1.Lease{lease("r", "b", t0, 10), lease("r", "a", t0.Add(-5*time.Second), 10)},
			now:      t0.Add(time.Second),
			want:     "a,b",
			wantNext: t0.Add(5 * time.Second),
		},
		"if a lease's renew time plus its duration has passed, its holder is not live": {
			leases:   []*coordinationv1.Lease{lease("r", "a", t0, 10), lease("r", "b", t0.Add(-11*time.Second), 10)},
			now:      t0,
			want:     "a",
			wantNext: t0.Add(10 * time.Second),
		},
		"if the renew time plus the duration is now, the holder is no longer live": {
			leases: []*coordinationv1.Lease{lease("r", "a", t0, 10)},
			now:    t0.Add(10 * time.Second),
			want:   "",
		},
		"if two leases have the same holder, it is one member": {
			leases:   []*coordinationv1.Lease{lease("r", "a", t0, 10), lease("s", "a", t0, 20)},
			now:      t0,
			want:     "a",
			wantNext: t0.Add(10 * time.Second),
		},
		"if a lease has no holder or no renew time, it is never live": {
			leases: []*coordinationv1.Lease{noHolder, noRenewal},
			now:    t0,
			want:   "",
		},
	} {
		t.Run(name, func(t *testing.T) {
			items := make([]coordinationv1.Lease, len(tc.leases))
			for i, l := range tc.leases {
				items[i] = *l
			}
			members, next := LiveMembers(Leases(items), tc.now)
			if got := strings.Join(members, ","); got != tc.want || !next.Equal(tc.wantNext) {
				t.Errorf("LiveMembers = %q, next expiry %v; want %q, %v", got, next, tc.want, tc.wantNext)
			}
		})
	}
}

func TestLeaseNamesAreValidAndDistinct(t *testing.T) {
	t.Parallel()
	if got := LeaseName("frigate", "frigate-host-7d9f-abcde"); got != "polyop-shard-frigate-frigate-host-7d9f-abcde" {
		t.Errorf("a name that is valid as it is was changed: %q", got)
	}
	long := strings.Repeat("a-very-long-ring-name.", 12)
	seen := map[string]string{}
	for _, tc := range [][2]string{
		{"frigate", "Host_A"}, {"frigate", "host-a"}, {"frigate", "host_a"},
		{long, "replica-1"}, {long, "replica-2"}, {"r", strings.Repeat("x", 300)}, {"r", strings.Repeat("x", 301)},
	} {
		name := LeaseName(tc[0], tc[1])
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("LeaseName(%q, %q) = %q, not a valid name: %v", tc[0], tc[1], name, errs)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("LeaseName(%q, %q) = %q, as for %s", tc[0], tc[1], name, other)
		}
		seen[name] = tc[0] + "/" + tc[1]
	}
}

func TestAnInvalidRingNameIsRefused(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset()
	for _, name := range []string{"", "has space", strings.Repeat("r", 64)} {
		if _, err := NewSource(fakeLeases{cs}, SourceOptions{Ring: name, Namespace: "ns"}); err == nil {
			t.Errorf("NewSource accepted the ring name %q", name)
		}
		if _, err := NewMember(cs.CoordinationV1(), MemberOptions{Ring: name, ReplicaID: "a", Namespace: "ns"}); err == nil {
			t.Errorf("NewMember accepted the ring name %q", name)
		}
	}
	if _, err := NewMember(cs.CoordinationV1(), MemberOptions{Ring: "r", ReplicaID: "a", Namespace: "ns", LeaseDuration: 10 * time.Second, RenewInterval: 10 * time.Second}); err == nil {
		t.Error("NewMember accepted a renew interval as long as the lease")
	}
}

// startSource runs s until the test ends.
func startSource(t *testing.T, s *Source) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the Source ended with %v", err)
		}
	})
}

// notified waits for a notification on ch, and fails t when none comes
// within a generous limit.
func notified(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("no notification of %s within 30s", what)
	}
}

func members(r *ring.Ring) string { return strings.Join(r.Members(), ",") }

func TestASourceDropsAnExpiredMemberWithoutAnyEvent(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	cs := fake.NewClientset(lease("r", "short", t0, 10), lease("r", "long", t0, 30), lease("other", "stranger", t0, 30))
	s, err := NewSource(fakeLeases{cs}, SourceOptions{Ring: "r", Namespace: "ns", ReplicaID: "long", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	changes := s.Subscribe()
	startSource(t, s)
	testenv.Eventually(t, 30*time.Second, "the first ring", func() (bool, string) {
		r := s.Current()
		return r != nil && members(r) == "long,short", members(r)
	})
	notified(t, changes, "the first ring")
	// The Source waits for the first expiry on the fake clock: step past it.
	testenv.Eventually(t, 30*time.Second, "the Source waiting for the first expiry", func() (bool, string) {
		return clk.HasWaiters(), "no timer set"
	})
	clk.Step(10 * time.Second)
	notified(t, changes, "the ring without the expired member")
	if got := members(s.Current()); got != "long" {
		t.Errorf("10s after the renewal, the members are %q, want long only", got)
	}
	if share := Share(s.Current(), "long"); share != 1 {
		t.Errorf("the one member's share is %v, want 1", share)
	}
}

// startFakeMember starts the Member of replica "a" of ring "r" in namespace
// "ns", as opts say otherwise, on a fake clientset and the fake clock clk,
// until the test ends. It returns once the Member has made its Lease, with
// the channel of its Subscribe.
func startFakeMember(t *testing.T, clk *testingclock.FakeClock, opts MemberOptions) (*Member, *fake.Clientset, <-chan struct{}) {
	t.Helper()
	cs := fake.NewClientset()
	opts.Ring, opts.ReplicaID, opts.Namespace, opts.Clock = "r", "a", "ns", clk
	m, err := NewMember(cs.CoordinationV1(), opts)
	if err != nil {
		t.Fatal(err)
	}
	changes := m.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the Member ended with %v", err)
		}
	})
	notified(t, changes, "the first renewal")
	return m, cs, changes
}

func TestAMemberThatCannotRenewStopsHoldingBeforeItsLeaseExpires(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	m, cs, changes := startFakeMember(t, clk, MemberOptions{LeaseDuration: 15 * time.Second})
	ctx := context.Background()
	if !m.Holding() || m.Check(nil) != nil {
		t.Fatalf("after its first renewal, the Member is not Holding: %v", m.Check(nil))
	}
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, LeaseName("r", "a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "a" || *l.Spec.LeaseDurationSeconds != 15 || !l.Spec.RenewTime.Equal(&metav1.MicroTime{Time: t0}) || l.Labels[sharding.RingLabel] != "r" {
		t.Errorf("the Lease is %+v, labels %v", l.Spec, l.Labels)
	}

	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server is unreachable")
	})
	clk.Step(5 * time.Second) // a renewal, failing
	if !m.Holding() {
		t.Error("5s after its last renewal, the Member no longer Holding, want it Holding until the 10s renew deadline")
	}
	clk.Step(5 * time.Second) // the renew deadline
	if m.Holding() {
		t.Error("10s after its last renewal, the Member is still Holding")
	}
	if err := m.Check(nil); err == nil || !strings.Contains(err.Error(), "last renewed its Lease ns/polyop-shard-r-a in ring r 10s ago") {
		t.Errorf("Check = %v", err)
	}
	notified(t, changes, "no longer Holding") // at the failed renewal of the ticker's next tick
}
