package sharder

import (
	"fmt"
	"hash/fnv"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// shardLabelPrefix is the prefix of the shard label: the object's owner.
	shardLabelPrefix = "shard.sharding.polyop.dev/"
	// drainLabelPrefix is the prefix of the drain label: the sharder asks the
	// owner to let go of the object.
	drainLabelPrefix = "drain.sharding.polyop.dev/"
	// drainValue is the drain label's value.
	drainValue = "true"
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

// validateNames checks that the ring's labels are valid label keys and, when
// member is not empty, that it is a valid label value.
func validateNames(ringName, member string) error {
	if ringName == "" {
		return fmt.Errorf("sharding: the ring has no name")
	}
	for _, k := range []string{ShardLabel(ringName), DrainLabel(ringName)} {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("sharding: ring %q gives the label key %q, which is not valid: %v", ringName, k, errs)
		}
	}
	if member != "" {
		if errs := validation.IsValidLabelValue(member); len(errs) > 0 {
			return fmt.Errorf("sharding: member %q of ring %q cannot be a label value (it names the member on each object it owns): %v", member, ringName, errs)
		}
	}
	return nil
}

// ChildLabels returns the shard label a child of controller carries: the
// same member as its controller's, so that the owner's child informers,
// selected by Shard.Selector, see it. It is nil when the controller carries
// no shard label. The host sets these labels on the children it applies.
func ChildLabels(ringName string, controller client.Object) map[string]string {
	key := ShardLabel(ringName)
	member, ok := controller.GetLabels()[key]
	if !ok || member == "" {
		return nil
	}
	return map[string]string{key: member}
}
