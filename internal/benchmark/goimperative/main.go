// Command goimperative is the Widget controller of polyop's end-to-end
// benchmark as an imperative Go sidecar: the baseline's own controller-runtime
// reconciler (widget.Reconciler), unchanged, registered with the Go SDK's
// CompleteRequests and given the Server's client, so that its Gets, its
// server-side apply of the ConfigMap and its status patch go through the
// host's Cluster service. It declares no desired children: it is what porting
// an existing operator to polyop without rewriting it costs, beside the
// declarative gosidecar.
//
// Usage:
//
//	goimperative --address unix:///path/to.sock [--max-concurrent-reconciles N] [--pprof-bind-address ADDR]
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	benchv1alpha1 "github.com/polyop/polyop/internal/benchmark/api/v1alpha1"
	"github.com/polyop/polyop/internal/benchmark/widget"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// fieldManager is the field manager of the ConfigMaps the reconciler applies.
const fieldManager = "bench-go-imperative"

func main() {
	address := flag.String("address", sidecar.DefaultAddress,
		"Where to serve the sidecar API: unix:///abs/path.sock, unix:rel/path.sock, tcp://host:port or host:port.")
	concurrency := flag.Int("max-concurrent-reconciles", 1, "How many Widgets the host reconciles at once.")
	pprofAddr := flag.String("pprof-bind-address", "", "Where the pprof endpoints listen; empty disables them.")
	opts := sidecar.Options{Name: "bench-widget-imperative"}
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if *pprofAddr != "" {
		go servePprof(*pprofAddr)
	}
	srv, err := newServer(opts, *concurrency)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goimperative:", err)
		os.Exit(1)
	}
	if err := srv.Serve(ctrl.SetupSignalHandler(), *address); err != nil {
		ctrl.Log.Error(err, "Serving the sidecar")
		os.Exit(1)
	}
}

// newServer returns the sidecar with the Widget controller registered: the
// same watches as the baseline's (Widgets on generation changes, every event
// of the ConfigMaps they control).
func newServer(opts sidecar.Options, concurrency int) (*sidecar.Server, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := benchv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	opts.Scheme = scheme
	srv, err := sidecar.New(opts)
	if err != nil {
		return nil, err
	}
	err = sidecar.NewControllerManagedBy[*benchv1alpha1.Widget](srv).
		Named(widget.ControllerName).
		WithUpdateFilters(sidecar.GenerationChanged).
		Owns(&corev1.ConfigMap{}).
		WithMaxConcurrentReconciles(concurrency).
		CompleteRequests(&widget.Reconciler{Client: srv.GetClient(), FieldManager: fieldManager})
	if err != nil {
		return nil, err
	}
	return srv, nil
}

func servePprof(addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if err := http.ListenAndServe(addr, mux); err != nil && !errors.Is(err, http.ErrServerClosed) {
		ctrl.Log.Error(err, "Serving pprof")
	}
}
