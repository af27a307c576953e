package admission

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultPath is where the host serves the mutating webhook of a kind, for
// example /default-examples-polyop-dev-v1-maintenancewindow. The core group
// is spelled "core".
func DefaultPath(gvk schema.GroupVersionKind) string {
	return "/default-" + pathSuffix(gvk)
}

// ValidatePath is where the host serves the validating webhook of a kind, for
// example /validate-examples-polyop-dev-v1-maintenancewindow.
func ValidatePath(gvk schema.GroupVersionKind) string {
	return "/validate-" + pathSuffix(gvk)
}

func pathSuffix(gvk schema.GroupVersionKind) string {
	group := gvk.Group
	if group == "" {
		group = "core"
	}
	return strings.ReplaceAll(group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
}
