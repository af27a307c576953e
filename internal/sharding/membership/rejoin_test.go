package membership

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/polyop/polyop/internal/testenv"
)

// TestAMemberPausedPastItsRenewDeadlineRejoinsInANewTermHeldOnlyOnceConfirmed
// pauses a Member (its clock jumps past the renew deadline, as for a process
// stopped and resumed): the renewal it makes at once on resuming starts a
// new term, acquires the Lease anew, and is not Holding until the host
// confirms the term.
func TestAMemberPausedPastItsRenewDeadlineRejoinsInANewTermHeldOnlyOnceConfirmed(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	m, cs, _ := startFakeMember(t, clk, MemberOptions{LeaseDuration: 6 * time.Second, ConfirmRejoin: true})
	ctx := context.Background()
	first := m.Term()
	if first.Number != 1 || !first.Valid() || !first.Until.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("after the first renewal the term is %+v, want term 1, held, until the 4s renew deadline", first)
	}
	if _, unconfirmed := m.Unconfirmed(); unconfirmed {
		t.Error("the first term awaits confirmation; the manager's caches are its fresh view")
	}

	// Renewals every 2s keep the term.
	clk.Step(2 * time.Second)
	testenv.Eventually(t, converge, "a renewal 2s in", func() (bool, string) {
		return m.Term().Until.Equal(t0.Add(6 * time.Second)), fmt.Sprintf("term %+v", m.Term())
	})
	if got := m.Term().Number; got != 1 {
		t.Errorf("a renewal within the term made term %d, want it to stay 1", got)
	}

	// Paused for 20s: the ticker fires once on resuming.
	resumed := t0.Add(22 * time.Second)
	clk.SetTime(resumed)
	testenv.Eventually(t, converge, "the renewal on resuming", func() (bool, string) {
		n, ok := m.Unconfirmed()
		return ok && n == 2, fmt.Sprintf("term %+v", m.Term())
	})
	if m.Holding() || m.Term().Valid() {
		t.Errorf("a rejoined Member is Holding before its term is confirmed: %+v", m.Term())
	}
	if err := m.Check(nil); err == nil || !strings.Contains(err.Error(), "rejoined ring r after its Lease ns/polyop-shard-r-a lapsed (term 2)") {
		t.Errorf("Check = %v, want it to say the replica rejoined", err)
	}
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, LeaseName("r", "a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Spec.AcquireTime.Equal(&metav1.MicroTime{Time: resumed}) {
		t.Errorf("the rejoin's renewal left acquireTime %v, want it acquired anew at %v", l.Spec.AcquireTime, resumed)
	}

	if m.Confirm(1) {
		t.Error("confirming the ended term 1 succeeded")
	}
	if !m.Confirm(2) || !m.Holding() || !m.Term().Valid() {
		t.Errorf("after confirming term 2 the Member holds %+v, Holding %v", m.Term(), m.Holding())
	}
}
