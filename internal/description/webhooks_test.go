package description

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestWebhookPathsAndNamesAreControllerRuntimes checks the paths against
// controller-runtime's builder (pkg/builder/webhook.go, generateMutatePath and
// generateValidatePath) and kubebuilder's +kubebuilder:webhook scaffold, which
// writes /mutate--v1-pod for the core group; the names against kubebuilder's
// m<kind>-<version>, qualified by the group, and the API server's rule for a
// webhook's name.
func TestWebhookPathsAndNamesAreControllerRuntimes(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		gvk                            schema.GroupVersionKind
		mutate, validate               string
		mutateName, validateName       string
		mutateAliases, validateAliases []string
	}{
		"a CRD's group has its dots as dashes": {
			gvk:    schema.GroupVersionKind{Group: "examples.polyop.dev", Version: "v1", Kind: "MaintenanceWindow"},
			mutate: "/mutate-examples-polyop-dev-v1-maintenancewindow", validate: "/validate-examples-polyop-dev-v1-maintenancewindow",
			mutateName: "mmaintenancewindow-v1.examples.polyop.dev", validateName: "vmaintenancewindow-v1.examples.polyop.dev",
			mutateAliases: []string{"/default-examples-polyop-dev-v1-maintenancewindow"},
		},
		"the core group is empty in a path, as kubebuilder writes /mutate--v1-pod": {
			gvk:    schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
			mutate: "/mutate--v1-pod", validate: "/validate--v1-pod",
			mutateName: "mpod-v1.core.k8s.io", validateName: "vpod-v1.core.k8s.io",
			mutateAliases: []string{"/default-core-v1-pod"}, validateAliases: []string{"/validate-core-v1-pod"},
		},
		"a built-in group without a dot": {
			gvk:    schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			mutate: "/mutate-apps-v1-deployment", validate: "/validate-apps-v1-deployment",
			mutateName: "mdeployment-v1.apps.k8s.io", validateName: "vdeployment-v1.apps.k8s.io",
			mutateAliases: []string{"/default-apps-v1-deployment"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wh := Webhook{GVK: tc.gvk}
			if got := wh.MutatePath(); got != tc.mutate {
				t.Errorf("MutatePath = %s, want %s", got, tc.mutate)
			}
			if got := wh.ValidatePath(); got != tc.validate {
				t.Errorf("ValidatePath = %s, want %s", got, tc.validate)
			}
			if got := wh.MutateName(); got != tc.mutateName {
				t.Errorf("MutateName = %s, want %s", got, tc.mutateName)
			}
			if got := wh.ValidateName(); got != tc.validateName {
				t.Errorf("ValidateName = %s, want %s", got, tc.validateName)
			}
			mutate, validate := wh.AliasPaths()
			if !slices.Equal(mutate, tc.mutateAliases) || !slices.Equal(validate, tc.validateAliases) {
				t.Errorf("AliasPaths = %v, %v, want %v, %v", mutate, validate, tc.mutateAliases, tc.validateAliases)
			}
			// The API server's rule for a webhook's name (admissionregistration
			// validation): a DNS subdomain of at least three segments.
			for _, n := range []string{wh.MutateName(), wh.ValidateName()} {
				if errs := validation.IsFullyQualifiedName(nil, n); len(errs) > 0 {
					t.Errorf("name %s: %v", n, errs)
				}
			}
		})
	}
}
