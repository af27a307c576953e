package membership

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/polyop/polyop/internal/sharding"

	"k8s.io/apimachinery/pkg/util/validation"
)

// leasePrefix starts every member Lease's name.
const leasePrefix = "polyop-shard-"

// LeaseName is the name of replicaID's Lease in ring:
// polyop-shard-<ring>-<replicaID>, made a valid name: lower case, characters
// other than letters, digits, '-' and '.' replaced by '-', and cut to 253
// characters. A name that had to change ends with a hash of ring and
// replicaID, so that different members still get different names.
func LeaseName(ring, replicaID string) string {
	want := leasePrefix + ring + "-" + replicaID
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, want)
	if name == want && len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(ring + "/" + replicaID))
	suffix := "-" + hex.EncodeToString(sum[:5])
	name = strings.TrimRight(name, "-.")
	if max := validation.DNS1123SubdomainMaxLength - len(suffix); len(name) > max {
		name = strings.TrimRight(name[:max], "-.")
	}
	return name + suffix
}

// validateRing says why ring cannot name a ring: it is a label value (of
// sharding.RingLabel) and part of a label key (ShardLabel).
func validateRing(ring string) error {
	if ring == "" {
		return fmt.Errorf("no ring name")
	}
	if errs := validation.IsQualifiedName(sharding.ShardLabel(ring)); len(errs) > 0 {
		return fmt.Errorf("ring name %q does not make a label key %s: %s", ring, sharding.ShardLabel(ring), strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(ring); len(errs) > 0 {
		return fmt.Errorf("ring name %q is not a label value: %s", ring, strings.Join(errs, "; "))
	}
	return nil
}
