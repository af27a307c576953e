package admission

import (
	"net/http"

	"github.com/polyop/polyop/internal/description"
)

// MaxRequestBytes is the largest AdmissionReview the host reads, as
// controller-runtime's admission webhook reads no more: a review holds at most
// two objects (the object and the old object) of at most 3 MiB each, the API
// server's limit on a request body, and less than 1 MiB besides.
const MaxRequestBytes = 7 << 20

// Registrar is where webhooks are registered: controller-runtime's
// webhook.Server, or an http.ServeMux in tests.
type Registrar interface {
	Register(path string, hook http.Handler)
}

// Register registers a mutating endpoint (Webhook.DefaultPath) for every
// webhook that declares default and a validating endpoint
// (Webhook.ValidatePath) for every webhook
// that declares validate, all served by sc. It returns the paths registered.
func Register(r Registrar, sc Sidecar, webhooks []description.Webhook, opts Options) []string {
	var paths []string
	for _, wh := range webhooks {
		if wh.Default {
			p := wh.DefaultPath()
			r.Register(p, NewDefaulting(sc, wh, opts))
			paths = append(paths, p)
		}
		if wh.Validate {
			p := wh.ValidatePath()
			r.Register(p, NewValidating(sc, wh, opts))
			paths = append(paths, p)
		}
	}
	return paths
}
