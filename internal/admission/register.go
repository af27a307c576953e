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

// Register registers a mutating endpoint (Webhook.MutatePath) for every
// webhook that declares default and a validating endpoint
// (Webhook.ValidatePath) for every webhook that declares validate, all served
// by sc, at controller-runtime's paths, so the configurations kubebuilder's
// markers generate call them; and each of the same handlers again at its
// Webhook.AliasPaths, the paths configurations written before named. It
// returns the paths registered, aliases last.
func Register(r Registrar, sc Sidecar, webhooks []description.Webhook, opts Options) []string {
	var paths, aliases []string
	for _, wh := range webhooks {
		mutateAliases, validateAliases := wh.AliasPaths()
		if wh.Default {
			h := NewDefaulting(sc, wh, opts)
			r.Register(wh.MutatePath(), h)
			paths = append(paths, wh.MutatePath())
			for _, p := range mutateAliases {
				r.Register(p, h)
				aliases = append(aliases, p)
			}
		}
		if wh.Validate {
			h := NewValidating(sc, wh, opts)
			r.Register(wh.ValidatePath(), h)
			paths = append(paths, wh.ValidatePath())
			for _, p := range validateAliases {
				r.Register(p, h)
				aliases = append(aliases, p)
			}
		}
	}
	return append(paths, aliases...)
}
