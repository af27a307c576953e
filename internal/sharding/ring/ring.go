// Package ring assigns objects to the replicas of a sharded host by
// consistent hashing over the same 64-bit space the API server's sharded list
// and watch uses.
//
// An object's place on the ring is the 64-bit FNV-1a hash of its
// metadata.uid, exactly as the API server computes it for
// shardRange(object.metadata.uid, start, end) (k8s.io/apimachinery's
// pkg/sharding). Each replica places virtual-node points on the ring, each at
// a hash of its name and the point's number; a hash belongs to the replica
// of the first point above it, wrapping around at the top. Adding a replica to
// N others so moves about 1/(N+1) of the objects, all of them to the new one,
// and every replica computing a ring from the same member names gets the same
// assignment.
package ring

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultVirtualNodes is the number of points each member places on the ring
// unless told otherwise: enough for shares within a few percent of 1/N with a
// handful of replicas, few enough that a member's ranges fit in one shard
// selector.
const DefaultVirtualNodes = 100

// Hash is the 64-bit FNV-1a hash of s: the API server's hash of a field for
// shardRange.
func Hash(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// HashUID is an object's place on the ring: the hash of its UID.
func HashUID(uid types.UID) uint64 { return Hash(string(uid)) }

// Range is a part of the hash space, from Start (included) to End
// (excluded). End 0 stands for 2^64, the top of the space, which a uint64
// cannot hold; a range never ends at 0 otherwise.
type Range struct {
	Start, End uint64
}

// Contains reports whether h falls in the range.
func (r Range) Contains(h uint64) bool {
	return h >= r.Start && (r.End == 0 || h < r.End)
}

// String is the range in the form the API server's shardRange takes its
// bounds: 0x-prefixed, 16 hex digits, and 0x10000000000000000 for 2^64.
func (r Range) String() string {
	return fmt.Sprintf("[%s, %s)", hexBound(r.Start, false), hexBound(r.End, r.End == 0))
}

func hexBound(v uint64, top bool) string {
	if top {
		return "0x10000000000000000"
	}
	return fmt.Sprintf("0x%016x", v)
}

type point struct {
	hash   uint64
	member string
}

// Ring is an immutable assignment of the hash space to members. The zero
// value and a ring of no members own nothing.
type Ring struct {
	members      []string
	virtualNodes int
	points       []point // sorted by hash, then member
	id           string  // ID's, set by New
}

// New returns the ring of the given members (duplicates and empty names are
// ignored), each with virtualNodes points; virtualNodes below 1 means
// DefaultVirtualNodes.
func New(members []string, virtualNodes int) *Ring {
	if virtualNodes < 1 {
		virtualNodes = DefaultVirtualNodes
	}
	ms := slices.Clone(members)
	ms = slices.DeleteFunc(ms, func(m string) bool { return m == "" })
	slices.Sort(ms)
	ms = slices.Compact(ms)
	r := &Ring{members: ms, virtualNodes: virtualNodes, points: make([]point, 0, len(ms)*virtualNodes)}
	for _, m := range ms {
		for i := range virtualNodes {
			r.points = append(r.points, point{hash: pointHash(m, i), member: m})
		}
	}
	slices.SortFunc(r.points, func(a, b point) int {
		if a.hash != b.hash {
			if a.hash < b.hash {
				return -1
			}
			return 1
		}
		return strings.Compare(a.member, b.member)
	})
	r.id = ringID(virtualNodes, ms)
	return r
}

// pointHash places a member's i-th point. Not FNV-1a: its high bits barely
// change between names that differ only in their last characters, which
// would bunch a member's points together; the first 8 bytes of a SHA-256
// spread them evenly.
func pointHash(member string, i int) uint64 {
	sum := sha256.Sum256([]byte(member + "/" + strconv.Itoa(i)))
	return binary.BigEndian.Uint64(sum[:8])
}

// Members returns the ring's members, sorted.
func (r *Ring) Members() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.members)
}

// ID identifies the ring's assignment: two rings with the same ID give
// every object to the same member. It is a hash of the members and the
// number of virtual nodes, 16 hex digits; "" for a nil ring.
func (r *Ring) ID() string {
	switch {
	case r == nil:
		return ""
	case r.id == "": // the zero value
		return ringID(r.virtualNodes, r.members)
	}
	return r.id
}

// Incarnated returns r with an ID that also tells each member's
// incarnation: for a ring of Lease holders, when each acquired its Lease
// (incarnations maps members to it; a member missing from it counts as "").
// It assigns every object as r does, but a member that drops out of the
// ring and comes back under the same name makes a ring with another ID, so
// that whatever was agreed on the ring before it left is not taken for
// agreement on the ring it comes back to.
func (r *Ring) Incarnated(incarnations map[string]string) *Ring {
	if r == nil {
		return nil
	}
	c := *r
	h := sha256.New()
	_, _ = h.Write([]byte(r.ID()))
	for _, m := range r.members {
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(incarnations[m]))
	}
	c.id = hex.EncodeToString(h.Sum(nil)[:8])
	return &c
}

// ringID is the ID of the ring of members (sorted, without duplicates),
// each with virtualNodes points.
func ringID(virtualNodes int, members []string) string {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%d", virtualNodes)
	for _, m := range members {
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(m))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Len is the number of members.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.members)
}

// Owner returns the member that owns hash h, or "" for an empty ring.
func (r *Ring) Owner(h uint64) string {
	if r == nil || len(r.points) == 0 {
		return ""
	}
	i, _ := slices.BinarySearchFunc(r.points, h, func(p point, h uint64) int {
		if p.hash <= h {
			return -1
		}
		return 1
	})
	if i == len(r.points) {
		i = 0
	}
	return r.points[i].member
}

// OwnerOf returns the member that owns the object with this UID.
func (r *Ring) OwnerOf(uid types.UID) string { return r.Owner(HashUID(uid)) }

// Ranges returns the parts of the hash space member owns, in order, adjacent
// parts merged; none when it is not a member.
func (r *Ring) Ranges(member string) []Range {
	if r == nil || len(r.points) == 0 || !slices.Contains(r.members, member) {
		return nil
	}
	var out []Range
	add := func(start, end uint64) {
		if n := len(out); n > 0 && out[n-1].End == start && start != 0 {
			out[n-1].End = end
			return
		}
		out = append(out, Range{Start: start, End: end})
	}
	// Point k owns [points[k-1].hash, points[k].hash); the first point also
	// owns the wrap-around [last, 2^64) and [0, first).
	first, last := r.points[0], r.points[len(r.points)-1]
	if first.member == member && first.hash > 0 {
		add(0, first.hash)
	}
	for k := 1; k < len(r.points); k++ {
		if r.points[k].member == member && r.points[k-1].hash < r.points[k].hash {
			add(r.points[k-1].hash, r.points[k].hash)
		}
	}
	if first.member == member {
		add(last.hash, 0)
	}
	return out
}

// ShardSelector returns the API server's shard selector for member's share
// of objects by UID (the ListOptions.ShardSelector of the ShardedListAndWatch
// feature), or "" when the member owns nothing.
func (r *Ring) ShardSelector(member string) string {
	ranges := r.Ranges(member)
	parts := make([]string, 0, len(ranges))
	for _, rg := range ranges {
		parts = append(parts, fmt.Sprintf("shardRange(object.metadata.uid, '%s', '%s')", hexBound(rg.Start, false), hexBound(rg.End, rg.End == 0)))
	}
	return strings.Join(parts, " || ")
}
