package description

import (
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// MutatePath is where the host serves the mutating webhook of w's kind, the
// path controller-runtime's webhook builder serves it at and kubebuilder's
// +kubebuilder:webhook markers name: /mutate-<group, dots as dashes>-
// <version>-<kind in lower case>, for example
// /mutate-examples-polyop-dev-v1-maintenancewindow. The core group is empty,
// as in /mutate--v1-pod.
func (w Webhook) MutatePath() string {
	return "/mutate-" + controllerRuntimePathSuffix(w.GVK)
}

// ValidatePath is where the host serves the validating webhook of w's kind,
// as controller-runtime does: for example
// /validate-examples-polyop-dev-v1-maintenancewindow, /validate--v1-pod.
func (w Webhook) ValidatePath() string {
	return "/validate-" + controllerRuntimePathSuffix(w.GVK)
}

// AliasPaths are the paths the host served w's webhooks at before it served
// controller-runtime's, which it still serves for the webhook configurations
// that name them: /default-<group>-<version>-<kind> for the mutating webhook,
// and for the core group, which they spelled "core",
// /validate-core-<version>-<kind>. Each handler is the one of the path it
// stands for; neither is printed in a configuration any more.
func (w Webhook) AliasPaths() (mutate, validate []string) {
	legacy := w.GVK
	if legacy.Group == "" {
		legacy.Group = "core"
		validate = append(validate, "/validate-"+controllerRuntimePathSuffix(legacy))
	}
	mutate = append(mutate, "/default-"+controllerRuntimePathSuffix(legacy))
	return mutate, validate
}

// MutateName is the name of w's mutating webhook in its configuration,
// kubebuilder's m<kind>-<version> qualified by the group (where kubebuilder
// writes kb.io, so that kinds of one name in two groups do not meet), for
// example mmaintenancewindow-v1.examples.polyop.dev. The API server wants
// three dot-separated segments, so a group without a dot (the core group,
// spelled core, apps, batch) is followed by k8s.io: mdeployment-v1.apps.k8s.io.
func (w Webhook) MutateName() string { return w.name("m") }

// ValidateName is the name of w's validating webhook in its configuration,
// for example vmaintenancewindow-v1.examples.polyop.dev.
func (w Webhook) ValidateName() string { return w.name("v") }

func (w Webhook) name(prefix string) string {
	group := w.GVK.Group
	if group == "" {
		group = "core"
	}
	if !strings.Contains(group, ".") {
		group += ".k8s.io"
	}
	return prefix + strings.ToLower(w.GVK.Kind) + "-" + w.GVK.Version + "." + group
}

// controllerRuntimePathSuffix is a kind in a webhook path as controller-runtime
// writes it (pkg/builder's generateMutatePath): the group with dots as
// dashes, the version, and the kind in lower case.
func controllerRuntimePathSuffix(gvk schema.GroupVersionKind) string {
	return strings.ReplaceAll(gvk.Group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
}

// serviceAccountNamespaceFile holds the namespace of the pod the process runs
// in, as Kubernetes mounts it.
var serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// DefaultServiceNamespace is the namespace of the Service in front of the
// webhook server when none is given: the namespace the process runs in
// ($POD_NAMESPACE, else the service account's namespace), else "default". It
// is the one rule for the host at run time (--webhook-service-namespace) and
// for the manifests `host webhooks` prints (--service-namespace), so that the
// certificate the host makes and the configurations that call it name the
// same Service.
func DefaultServiceNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if data, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns
		}
	}
	return "default"
}
