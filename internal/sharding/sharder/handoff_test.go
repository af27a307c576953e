package sharder

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/polyop/polyop/internal/sharding/shardtest"
)

// counts are the sharder's counters for a ring.
type counts struct{ handoffs, moves, assignments float64 }

func countsOf(ringName string) counts {
	return counts{
		handoffs:    testutil.ToFloat64(handoffsTotal.WithLabelValues(ringName)),
		moves:       testutil.ToFloat64(deadMovesTotal.WithLabelValues(ringName)),
		assignments: testutil.ToFloat64(assignmentsTotal.WithLabelValues(ringName)),
	}
}

// movedFrom counts the objects whose owner in before is one of members and
// differs in after.
func movedFrom(before, after map[types.NamespacedName]string, members ...string) int {
	n := 0
	for k, b := range before {
		for _, m := range members {
			if b == m && after[k] != b {
				n++
			}
		}
	}
	return n
}

func TestEveryObjectIsLabelledWithItsOwnerAndMovesFromADeadOrToANewMemberWithoutTwoReconcilers(t *testing.T) {
	f := newFixture(t, "ring-a")
	for _, m := range []string{"a", "b", "c"} {
		f.startReplica(m)
	}
	r3 := f.setRing("a", "b", "c")
	f.createObjects(shardtest.ObjectCount(t))

	f.awaitConverged(r3)
	f.AwaitReconciledByOwners(r3, nil, nil)
	f.awaitGauges(r3)
	f.Det.CheckNoOverlap(t)

	t.Log("3 → 2: c dies and leaves the ring; its objects move straight to a and b")
	before, c0 := f.Owners(r3), countsOf(f.Ring)
	f.Stop("c")
	mark := f.Det.Mark()
	r2 := f.setRing("a", "b")
	f.awaitConverged(r2)
	moved := f.AwaitReconciledByOwners(r2, before, mark)
	f.awaitGauges(r2)
	f.Det.CheckNoOverlap(t)
	after := f.Owners(r2)
	if want := movedFrom(before, after, "c"); moved != want || moved == 0 {
		t.Fatalf("%d objects changed owners, %d of them c's: consistent hashing moves c's alone", moved, want)
	}
	if c := countsOf(f.Ring); c.moves-c0.moves != float64(moved) || c.handoffs != c0.handoffs {
		t.Errorf("the sharder counted %v dead-member moves and %v handoffs, want %d and 0", c.moves-c0.moves, c.handoffs-c0.handoffs, moved)
	}

	t.Log("2 → 3: d joins; a and b hand its share off through the drain label")
	before, c0 = after, countsOf(f.Ring)
	f.startReplica("d")
	mark = f.Det.Mark()
	r3d := f.setRing("a", "b", "d")
	f.awaitConverged(r3d)
	moved = f.AwaitReconciledByOwners(r3d, before, mark)
	f.awaitGauges(r3d)
	f.Det.CheckNoOverlap(t)
	if moved == 0 {
		t.Fatal("no object moved to d")
	}
	if c := countsOf(f.Ring); c.handoffs-c0.handoffs != float64(moved) || c.moves != c0.moves {
		t.Errorf("the sharder counted %v handoffs and %v dead-member moves, want %d and 0", c.handoffs-c0.handoffs, c.moves-c0.moves, moved)
	}
}

func TestScalingFromOneToThreeAndBackMovesEveryObjectWithoutTwoReconcilers(t *testing.T) {
	f := newFixture(t, "ring-b")
	f.startReplica("a")
	r1 := f.setRing("a")
	f.createObjects(shardtest.ObjectCount(t))
	f.awaitConverged(r1)
	f.AwaitReconciledByOwners(r1, nil, nil)
	f.Det.CheckNoOverlap(t)

	t.Log("1 → 3: b and c join; a hands off two thirds")
	before, c0 := f.Owners(r1), countsOf(f.Ring)
	f.startReplica("b")
	f.startReplica("c")
	mark := f.Det.Mark()
	r3 := f.setRing("a", "b", "c")
	f.awaitConverged(r3)
	moved := f.AwaitReconciledByOwners(r3, before, mark)
	f.awaitGauges(r3)
	f.Det.CheckNoOverlap(t)
	if c := countsOf(f.Ring); c.handoffs-c0.handoffs != float64(moved) {
		t.Errorf("the sharder counted %v handoffs, want %d", c.handoffs-c0.handoffs, moved)
	}

	t.Log("3 → 1: b and c die; a takes their objects back")
	before = f.Owners(r3)
	f.Stop("b")
	f.Stop("c")
	mark = f.Det.Mark()
	r1 = f.setRing("a")
	f.awaitConverged(r1)
	f.AwaitReconciledByOwners(r1, before, mark)
	f.awaitGauges(r1)
	f.Det.CheckNoOverlap(t)
}
