package membership

import (
	"math"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/polyop/polyop/internal/sharding"

	"github.com/polyop/polyop/internal/sharding/ring"
)

// MemberLease is what a ring's Lease says about its member.
type MemberLease struct {
	// Holder is the member's replica ID: the Lease's holderIdentity.
	Holder string
	// Lease is the Lease's name.
	Lease string
	// RenewTime is when the holder last renewed the Lease, by its clock.
	RenewTime time.Time
	// Expires is RenewTime plus the Lease's duration: the member is live
	// until then.
	Expires time.Time
	// AcquireTime is when the holder acquired the Lease: its first renewal,
	// or the first after its last term ended. It is the member's
	// incarnation in the ring's ID (ring.Ring.Incarnated).
	AcquireTime time.Time
	// AdoptedRing is the ID of the ring the member has adopted
	// (sharding.AdoptedRingAnnotation; server-side mode), "" for none.
	AdoptedRing string
}

// Live reports whether the member is live at now.
func (m MemberLease) Live(now time.Time) bool { return m.Expires.After(now) }

// Leases reads the ring's Leases: those with a holder and a renew time, sorted
// by holder, then by name. A Lease without a holder or a renew time (none a
// Member writes) or without a duration is never live, and is left out.
func Leases(leases []coordinationv1.Lease) []MemberLease {
	out := make([]MemberLease, 0, len(leases))
	for i := range leases {
		spec := leases[i].Spec
		if spec.HolderIdentity == nil || *spec.HolderIdentity == "" || spec.RenewTime == nil || spec.LeaseDurationSeconds == nil {
			continue
		}
		renewed := spec.RenewTime.Time
		var acquired time.Time
		if spec.AcquireTime != nil {
			acquired = spec.AcquireTime.Time
		}
		out = append(out, MemberLease{
			AcquireTime: acquired,
			Holder:      *spec.HolderIdentity,
			Lease:       leases[i].Name,
			RenewTime:   renewed,
			Expires:     renewed.Add(time.Duration(*spec.LeaseDurationSeconds) * time.Second),

			AdoptedRing: leases[i].Annotations[sharding.AdoptedRingAnnotation],
		})
	}
	slices.SortFunc(out, func(a, b MemberLease) int {
		if c := strings.Compare(a.Holder, b.Holder); c != 0 {
			return c
		}
		return strings.Compare(a.Lease, b.Lease)
	})
	return out
}

// Incarnations maps the holder of each Lease live at now to when it
// acquired it (RFC 3339, nanoseconds), the latest where one holds several:
// the incarnations of the ring's ID.
func Incarnations(leases []MemberLease, now time.Time) map[string]string {
	latest := map[string]time.Time{}
	for _, l := range leases {
		if t, seen := latest[l.Holder]; l.Live(now) && (!seen || l.AcquireTime.After(t)) {
			latest[l.Holder] = l.AcquireTime
		}
	}
	out := make(map[string]string, len(latest))
	for m, t := range latest {
		out[m] = t.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// LiveMembers returns the holders of the Leases live at now, sorted and
// without duplicates, and when the first of those Leases expires (the zero
// time when none is live): the live set can change without any event then.
func LiveMembers(leases []MemberLease, now time.Time) (members []string, nextExpiry time.Time) {
	for _, l := range leases {
		if !l.Live(now) {
			continue
		}
		members = append(members, l.Holder)
		if nextExpiry.IsZero() || l.Expires.Before(nextExpiry) {
			nextExpiry = l.Expires
		}
	}
	slices.Sort(members)
	return slices.Compact(members), nextExpiry
}

// Share is the fraction of the hash space r gives member, from 0 to 1.
func Share(r *ring.Ring, member string) float64 {
	var owned float64
	for _, rg := range r.Ranges(member) {
		end := float64(rg.End)
		if rg.End == 0 {
			end = math.Exp2(64)
		}
		owned += end - float64(rg.Start)
	}
	return owned / math.Exp2(64)
}
