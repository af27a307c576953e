package description

import (
	"fmt"
	"os"
	"strings"
)

// DefaultPath is where the host serves the mutating webhook of w's kind, for
// example /default-examples-polyop-dev-v1-maintenancewindow. The core group
// is spelled "core".
func (w Webhook) DefaultPath() string {
	return "/default-" + webhookPathSuffix(w.GVK)
}

// ValidatePath is where the host serves the validating webhook of w's kind,
// for example /validate-examples-polyop-dev-v1-maintenancewindow.
func (w Webhook) ValidatePath() string {
	return "/validate-" + webhookPathSuffix(w.GVK)
}

// DefaultName is the name of w's mutating webhook in its configuration, a
// qualified name as the API server requires, for example
// default-v1.maintenancewindows.examples.polyop.dev. It needs w's resource,
// which Resolve sets.
func (w Webhook) DefaultName() string { return w.name("default") }

// ValidateName is the name of w's validating webhook in its configuration,
// for example validate-v1.maintenancewindows.examples.polyop.dev.
func (w Webhook) ValidateName() string { return w.name("validate") }

func (w Webhook) name(verb string) string {
	group := w.GVK.Group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s-%s.%s.%s", verb, w.GVK.Version, w.Resource, group)
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
