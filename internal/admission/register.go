package admission

import (
	"net/http"

	"github.com/polyop/polyop/internal/sidecar"
)

// Registrar is where webhooks are registered: controller-runtime's
// webhook.Server, or an http.ServeMux in tests.
type Registrar interface {
	Register(path string, hook http.Handler)
}

// Register registers a mutating endpoint (DefaultPath) for every webhook that
// declares default and a validating endpoint (ValidatePath) for every webhook
// that declares validate, all served by sc. It returns the paths registered.
func Register(r Registrar, sc Sidecar, webhooks []sidecar.Webhook, opts Options) []string {
	var paths []string
	for _, wh := range webhooks {
		if wh.Default {
			p := DefaultPath(wh.GVK)
			r.Register(p, NewDefaulting(sc, wh, opts))
			paths = append(paths, p)
		}
		if wh.Validate {
			p := ValidatePath(wh.GVK)
			r.Register(p, NewValidating(sc, wh, opts))
			paths = append(paths, p)
		}
	}
	return paths
}
