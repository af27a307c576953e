package sharder

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/sharding"
)

// validateNames checks that the ring's labels are valid label keys and, when
// member is not empty, that it is a valid label value.
func validateNames(ringName, member string) error {
	if ringName == "" {
		return fmt.Errorf("sharding: the ring has no name")
	}
	for _, k := range []string{sharding.ShardLabel(ringName), sharding.DrainLabel(ringName)} {
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
	key := sharding.ShardLabel(ringName)
	member, ok := controller.GetLabels()[key]
	if !ok || member == "" {
		return nil
	}
	return map[string]string{key: member}
}
