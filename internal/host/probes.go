package host

import (
	"fmt"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// probes are the host's /healthz and /readyz. They serve what
// controller-runtime's manager serves (the same paths, the same text, ?exclude=
// and one path per check), except that /readyz?verbose says why a check of
// the host's own fails, where controller-runtime writes "reason withheld" for
// every check (its endpoint may be public). The host's reasons are safe to
// show: the sidecar's address (a socket in the pod, or the address the
// operator gave), whether it is unreachable, the status its health service
// reports, a sidecar that serves no health service (another protocol); the
// kinds whose informers have not synced; a webhook server not started yet.
type probes struct {
	healthz, readyz *healthz.Handler
	// explained are the readiness checks whose failure /readyz?verbose
	// explains.
	explained map[string]bool
}

func newProbes() *probes {
	return &probes{
		healthz:   &healthz.Handler{Checks: map[string]healthz.Checker{}},
		readyz:    &healthz.Handler{Checks: map[string]healthz.Checker{}},
		explained: map[string]bool{},
	}
}

// addHealthz adds a liveness check.
func (p *probes) addHealthz(name string, check healthz.Checker) {
	p.healthz.Checks[name] = check
}

// addReadyz adds a readiness check; with explain, /readyz?verbose says why
// it fails.
func (p *probes) addReadyz(name string, check healthz.Checker, explain bool) {
	p.readyz.Checks[name] = check
	p.explained[name] = explain
}

// serve adds the probes' server, listening on addr, to mgr. An empty addr or
// "0" serves none.
func (p *probes) serve(mgr manager.Manager, addr string) error {
	if addr == "" || addr == "0" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("error listening on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", http.StripPrefix("/healthz", p.healthz))
	mux.Handle("/healthz/", http.StripPrefix("/healthz", p.healthz))
	ready := &explainedHandler{Handler: p.readyz, explained: p.explained}
	mux.Handle("/readyz", http.StripPrefix("/readyz", ready))
	mux.Handle("/readyz/", http.StripPrefix("/readyz", ready))
	return mgr.Add(&manager.Server{
		Name:     "health probe",
		Server:   &http.Server{Handler: mux, ReadHeaderTimeout: 32 * time.Second},
		Listener: ln,
	})
}

// explainedHandler is a healthz.Handler whose aggregated answer, when asked
// with ?verbose, gives the reason of each failed check in explained.
type explainedHandler struct {
	*healthz.Handler
	explained map[string]bool
}

func (h *explainedHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	p := req.URL.Path
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	if _, verbose := req.URL.Query()["verbose"]; !verbose || path.Clean(p) != "/" {
		// Quiet, or one check: controller-runtime's answer. (One check's
		// own path gives its error.)
		h.Handler.ServeHTTP(w, req)
		return
	}
	excluded := req.URL.Query()["exclude"]
	names := make([]string, 0, len(h.Checks))
	for name := range h.Checks {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	failed := false
	for _, name := range names {
		if slices.Contains(excluded, name) {
			fmt.Fprintf(&b, "[+]%s excluded: ok\n", name)
			continue
		}
		err := h.Checks[name](req)
		switch {
		case err == nil:
			fmt.Fprintf(&b, "[+]%s ok\n", name)
		case h.explained[name]:
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %s\n", name, oneLine(err.Error()))
		default:
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: reason withheld\n", name)
		}
	}
	if len(names) == 0 {
		b.WriteString("[+]ping ok\n")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		w.WriteHeader(http.StatusInternalServerError)
		b.WriteString("healthz check failed\n")
	} else {
		w.WriteHeader(http.StatusOK)
		b.WriteString("healthz check passed\n")
	}
	_, _ = w.Write([]byte(b.String()))
}

// oneLine keeps a reason on its line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
