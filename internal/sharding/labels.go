// Package sharding holds the names every part of polyop's sharding shares:
// the labels of a ring's Leases and of the objects the ring assigns. The
// parts are the ring (package ring), membership through Leases (package
// membership), the label-mode sharder with its handoff (package sharder),
// the server-side mode (package serverside), the rejoin after a lapse
// (package rejoin) and what runs them in one replica of the host (package
// replica); docs/sharding.md describes them.
package sharding

import (
	"fmt"
	"hash/fnv"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// RingLabel labels every Lease of a ring with the ring's name.
	RingLabel = "sharding.polyop.dev/ring"
	// shardLabelPrefix is the prefix of the shard label: the object's owner.
	shardLabelPrefix = "shard.sharding.polyop.dev/"
	// drainLabelPrefix is the prefix of the drain label: the sharder asks the
	// owner to let go of the object.
	drainLabelPrefix = "drain.sharding.polyop.dev/"
	// DrainValue is the drain label's value.
	DrainValue = "true"
	// AdoptedRingAnnotation, on a member's Lease, holds the ID of the ring
	// (ring.Ring.ID) the member has adopted in the server-side mode: it
	// reconciles by that ring, and no reconcile of an object that ring gives
	// another member is in flight there.
	AdoptedRingAnnotation = "sharding.polyop.dev/adopted-ring"
)

// ShardLabel is the label that names the member owning an object of the
// ring: shard.sharding.polyop.dev/<ring>.
func ShardLabel(ringName string) string { return shardLabelPrefix + labelName(ringName) }

// DrainLabel is the label with which the sharder asks an object's owner to
// let go of it: drain.sharding.polyop.dev/<ring>.
func DrainLabel(ringName string) string { return drainLabelPrefix + labelName(ringName) }

// labelName is the ring's name as the name part of a label key, which holds
// at most 63 characters: longer names keep their first 54 characters and end
// in a hash of the whole name, so two long names stay apart.
func labelName(ringName string) string {
	if len(ringName) <= validation.LabelValueMaxLength {
		return ringName
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(ringName))
	return fmt.Sprintf("%s-%08x", ringName[:validation.LabelValueMaxLength-9], h.Sum32())
}
