// Command gosidecar is the Widget controller of polyop's end-to-end benchmark
// as a Go sidecar, built with the Go SDK (sdk/go/sidecar). The polyop host
// runs it.
//
// Each reconcile declares the Widget's ConfigMap as its one desired child
// (the set is complete) and marks the Widget ready: the host applies the
// ConfigMap with server-side apply when it differs from what its cache holds,
// sets the Widget as its controller owner, and writes the status when it
// changed. The logic is package widget's, the baseline's own.
//
// With --imperative it is the imperative Go sidecar instead: the baseline's
// own controller-runtime reconciler (widget.Reconciler), unchanged,
// registered with CompleteRequests and given the Server's client, so that its
// Gets, its server-side apply of the ConfigMap and its status patch go
// through the host's Cluster service, with no desired children: what porting
// an existing operator to polyop without rewriting it costs.
//
// Usage:
//
//	gosidecar --address unix:///path/to.sock [--imperative] [--max-concurrent-reconciles N] [--pprof-bind-address ADDR]
package main

import (
	"context"
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

	"github.com/polyop/polyop/sdk/go/sidecar"
	benchv1alpha1 "github.com/polyop/polyop/test/benchmark/api/v1alpha1"
	"github.com/polyop/polyop/test/benchmark/widget"
)

func main() {
	address := flag.String("address", sidecar.DefaultAddress,
		"Where to serve the sidecar API: unix:///abs/path.sock, unix:rel/path.sock, tcp://host:port or host:port.")
	concurrency := flag.Int("max-concurrent-reconciles", 1, "How many Widgets the host reconciles at once.")
	pprofAddr := flag.String("pprof-bind-address", "", "Where the pprof endpoints listen; empty disables them.")
	imperative := flag.Bool("imperative", false, "Run the baseline's reconciler over the SDK's client instead of desiring the ConfigMap.")
	skip := flag.Bool("skip-unchanged-inputs", false, "Declare the controller a function of its inputs, so the host skips calls whose inputs are unchanged.")
	opts := sidecar.Options{Name: "bench-widget"}
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *imperative && opts.Name == "bench-widget" {
		opts.Name = "bench-widget-imperative"
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if *pprofAddr != "" {
		go servePprof(*pprofAddr)
	}
	srv, err := newServer(opts, *concurrency, *imperative, *skip)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gosidecar:", err)
		os.Exit(1)
	}
	if err := srv.Serve(ctrl.SetupSignalHandler(), *address); err != nil {
		ctrl.Log.Error(err, "Serving the sidecar")
		os.Exit(1)
	}
}

// imperativeFieldManager is the field manager of the ConfigMaps the
// imperative reconciler applies.
const imperativeFieldManager = "bench-go-imperative"

// newServer returns the sidecar with the Widget controller registered, with
// the baseline's watches (Widgets on generation changes, every event of the
// ConfigMaps they control): declarative, or the baseline's reconciler when
// imperative; skip declares the controller a function of its inputs.
func newServer(opts sidecar.Options, concurrency int, imperative, skip bool) (*sidecar.Server, error) {
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
	b := sidecar.NewControllerManagedBy[*benchv1alpha1.Widget](srv).
		Named(widget.ControllerName).
		WithUpdateFilters(sidecar.GenerationChanged).
		Owns(&corev1.ConfigMap{}).
		WithMaxConcurrentReconciles(concurrency).
		WithSkipUnchangedInputs(skip)
	if imperative {
		err = b.CompleteRequests(&widget.Reconciler{Client: srv.GetClient(), FieldManager: imperativeFieldManager})
	} else {
		err = b.Complete(sidecar.ReconcilerFunc[*benchv1alpha1.Widget](reconcile))
	}
	if err != nil {
		return nil, err
	}
	return srv, nil
}

// reconcile desires the Widget's ConfigMap, the complete set of its
// children, and marks the Widget ready.
func reconcile(ctx context.Context, w *benchv1alpha1.Widget) (sidecar.Result, error) {
	if err := sidecar.Desire(ctx, widget.ConfigMap(w)); err != nil {
		return sidecar.Result{}, err
	}
	sidecar.DesiredComplete(ctx)
	widget.MarkReady(w)
	return sidecar.Result{}, nil
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
