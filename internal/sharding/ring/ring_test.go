package ring

import (
	"fmt"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

func uids(n int) []types.UID {
	out := make([]types.UID, n)
	for i := range out {
		out[i] = uuid.NewUUID()
	}
	return out
}

// apiServerSelector is member's share as the API machinery's own shard
// selector, which the API server evaluates for ListOptions.ShardSelector.
func apiServerSelector(r *Ring, member string) sharding.Selector {
	var reqs []sharding.ShardRangeRequirement
	for _, rg := range r.Ranges(member) {
		reqs = append(reqs, sharding.ShardRangeRequirement{Key: "object.metadata.uid", Start: hexBound(rg.Start, false), End: hexBound(rg.End, rg.End == 0)})
	}
	return sharding.NewSelector(reqs...)
}

func TestEveryObjectHasExactlyTheOwnerWhoseRangesTheAPIServerMatches(t *testing.T) {
	r := New([]string{"host-a", "host-b", "host-c"}, 0)
	for _, uid := range uids(3000) {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: uid}}
		owner := r.OwnerOf(uid)
		matched := 0
		for _, m := range r.Members() {
			ok, err := apiServerSelector(r, m).Matches(obj)
			if err != nil {
				t.Fatalf("matching %s against %s's selector: %v", uid, m, err)
			}
			inRanges := false
			for _, rg := range r.Ranges(m) {
				inRanges = inRanges || rg.Contains(HashUID(uid))
			}
			if ok != inRanges {
				t.Fatalf("UID %s: the API machinery's selector for %s says %v, its ranges say %v", uid, m, ok, inRanges)
			}
			if ok {
				matched++
				if m != owner {
					t.Fatalf("UID %s is owned by %s but matches %s's selector", uid, owner, m)
				}
			}
		}
		if matched != 1 {
			t.Fatalf("UID %s matches %d members' selectors, want exactly 1", uid, matched)
		}
	}
}

func TestHashIsTheAPIServersHash(t *testing.T) {
	for _, s := range []string{"", "a", "0f9c1a5e-4a0b-4c4e-9a7e-1d2b3c4d5e6f"} {
		if got, want := fmt.Sprintf("%016x", Hash(s)), sharding.HashField(s); got != want {
			t.Errorf("Hash(%q) = %s, the API machinery's = %s", s, got, want)
		}
	}
}

func TestRangesCoverTheWholeSpaceOnce(t *testing.T) {
	r := New([]string{"a", "b", "c", "d"}, 7)
	var total float64
	for _, m := range r.Members() {
		for _, rg := range r.Ranges(m) {
			end := float64(rg.End)
			if rg.End == 0 {
				end = math.Exp2(64)
			}
			if end <= float64(rg.Start) {
				t.Fatalf("%s has an empty or reversed range %s", m, rg)
			}
			total += end - float64(rg.Start)
		}
	}
	if total != math.Exp2(64) {
		t.Errorf("the ranges cover %g of the %g hashes", total, math.Exp2(64))
	}
	for _, h := range []uint64{0, 1, math.MaxUint64, 1 << 63} {
		owners := 0
		for _, m := range r.Members() {
			for _, rg := range r.Ranges(m) {
				if rg.Contains(h) {
					owners++
					if m != r.Owner(h) {
						t.Errorf("hash %#x is in %s's range %s but owned by %s", h, m, rg, r.Owner(h))
					}
				}
			}
		}
		if owners != 1 {
			t.Errorf("hash %#x is in %d ranges, want 1", h, owners)
		}
	}
}

func TestSharesAreNearEven(t *testing.T) {
	objects := uids(30000)
	for n := 1; n <= 5; n++ {
		var members []string
		for i := range n {
			members = append(members, fmt.Sprintf("polyop-host-%d", i))
		}
		r := New(members, 0)
		count := map[string]int{}
		for _, uid := range objects {
			count[r.OwnerOf(uid)]++
		}
		for _, m := range members {
			share := float64(count[m]) / float64(len(objects))
			if want := 1 / float64(n); math.Abs(share-want) > 0.35*want {
				t.Errorf("with %d members, %s owns %.3f of the objects, want %.3f ± 35%%", n, m, share, want)
			}
		}
	}
}

func TestAddingAMemberMovesObjectsOnlyToIt(t *testing.T) {
	objects := uids(20000)
	before := New([]string{"a", "b", "c"}, 0)
	after := New([]string{"a", "b", "c", "d"}, 0)
	moved := 0
	for _, uid := range objects {
		was, is := before.OwnerOf(uid), after.OwnerOf(uid)
		if was != is {
			moved++
			if is != "d" {
				t.Fatalf("UID %s moved from %s to %s, not to the new member", uid, was, is)
			}
		}
	}
	if share := float64(moved) / float64(len(objects)); share < 0.15 || share > 0.35 {
		t.Errorf("adding a 4th member moved %.3f of the objects, want about 1/4", share)
	}
}

func TestTheAssignmentDependsOnlyOnTheMembers(t *testing.T) {
	a := New([]string{"x", "y", "z", "y", ""}, 0)
	b := New([]string{"z", "x", "y"}, 0)
	if got := a.Members(); strings.Join(got, ",") != "x,y,z" {
		t.Errorf("Members = %q", got)
	}
	for _, uid := range uids(2000) {
		if a.OwnerOf(uid) != b.OwnerOf(uid) {
			t.Fatalf("UID %s: %s in one ring, %s in the same members' other", uid, a.OwnerOf(uid), b.OwnerOf(uid))
		}
	}
}

func TestAnEmptyRingOwnsNothing(t *testing.T) {
	var nilRing *Ring
	for _, r := range []*Ring{nilRing, New(nil, 0)} {
		if r.Owner(42) != "" || r.Ranges("a") != nil || r.ShardSelector("a") != "" || r.Len() != 0 {
			t.Errorf("an empty ring owns something: %q %v %q", r.Owner(42), r.Ranges("a"), r.ShardSelector("a"))
		}
	}
	one := New([]string{"only"}, 3)
	if got := one.ShardSelector("only"); got != "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')" {
		t.Errorf("a one-member ring's selector = %q, want the whole space", got)
	}
	if one.Ranges("other") != nil {
		t.Error("a non-member owns ranges")
	}
}

func TestTheIDNamesTheAssignment(t *testing.T) {
	same := New([]string{"x", "y"}, 0).ID() == New([]string{"y", "x", "x"}, 0).ID()
	if !same {
		t.Error("two rings of the same members have different IDs")
	}
	for name, other := range map[string]*Ring{
		"another member":         New([]string{"x", "z"}, 0),
		"one member fewer":       New([]string{"x"}, 0),
		"other virtual nodes":    New([]string{"x", "y"}, 7),
		"names that join to one": New([]string{"xy"}, 0),
	} {
		if other.ID() == New([]string{"x", "y"}, 0).ID() {
			t.Errorf("a ring of %s has the same ID", name)
		}
	}
	if len(New(nil, 0).ID()) != 16 {
		t.Errorf("ID %q is not 16 hex digits", New(nil, 0).ID())
	}
}

func TestAnIncarnatedRingAssignsAsItsRingButIsAnotherRingWhenAMemberComesBack(t *testing.T) {
	t.Parallel()
	r := New([]string{"a", "b", "c"}, 0)
	before := r.Incarnated(map[string]string{"a": "t1", "b": "t1", "c": "t1"})
	after := r.Incarnated(map[string]string{"a": "t1", "b": "t1", "c": "t2"})
	again := New([]string{"c", "b", "a"}, 0).Incarnated(map[string]string{"a": "t1", "b": "t1", "c": "t1"})
	if before.ID() == after.ID() {
		t.Errorf("c came back (incarnation t2), and the ring's ID stayed %s", before.ID())
	}
	if before.ID() != again.ID() {
		t.Errorf("the same members and incarnations make IDs %s and %s", before.ID(), again.ID())
	}
	if before.ID() == r.ID() {
		t.Errorf("the incarnated ring has the plain ring's ID %s", r.ID())
	}
	for _, uid := range uids(1000) {
		if o, w := after.OwnerOf(uid), r.OwnerOf(uid); o != w {
			t.Fatalf("the incarnated ring gives %s to %s, the ring to %s", uid, o, w)
		}
	}
}
