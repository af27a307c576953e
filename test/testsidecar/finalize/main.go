// Package finalize is the finalize mode of testsidecar (testsidecar
// finalize): a sidecar built with the Go SDK for the
// conformance tests of finalizers: it reconciles the ConfigMaps labelled
// conformance.polyop.dev/finalize with the finalizer
// conformance.polyop.dev/cleanup, and its Finalize holds an object while the
// object's annotation conformance.polyop.dev/hold is "true".
//
// Usage:
//
//	testsidecar finalize --address unix:///path/to/sidecar.sock
package finalize

import (
	"context"
	"flag"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	sdkaddress "github.com/polyop/polyop/sdk/go/address"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

const (
	// Label selects the reconciled ConfigMaps.
	Label = "conformance.polyop.dev/finalize"
	// Finalizer is the controller's finalizer.
	Finalizer = "conformance.polyop.dev/cleanup"
	// HoldAnnotation, "true", keeps Finalize from finishing.
	HoldAnnotation = "conformance.polyop.dev/hold"
)

// cleanup finalizes ConfigMaps.
type cleanup struct{}

func (cleanup) Reconcile(context.Context, *corev1.ConfigMap) (sidecar.Result, error) {
	return sidecar.Result{}, nil
}

// Finalize waits while the object is held, then records an event and lets
// it go.
func (cleanup) Finalize(ctx context.Context, cm *corev1.ConfigMap) (sidecar.Result, error) {
	if cm.Annotations[HoldAnnotation] == "true" {
		sidecar.Recorder(ctx).Event(corev1.EventTypeNormal, "Holding", "the object is held")
		return sidecar.Result{RequeueAfter: 500 * time.Millisecond}, nil
	}
	sidecar.Recorder(ctx).Event(corev1.EventTypeNormal, "Finalized", "cleaned up after "+cm.Name)
	return sidecar.Result{}, nil
}

// Main runs the mode with the command line args, and exits the process
// when it fails.
func Main(args []string) {
	fs := flag.NewFlagSet("testsidecar finalize", flag.ExitOnError)
	address := fs.String("address", sdkaddress.Default, "Where to serve the sidecar API.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	_ = fs.Parse(args)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	srv, err := sidecar.New(sidecar.Options{Name: "finalize-conformance"})
	if err == nil {
		err = sidecar.NewControllerManagedBy[*corev1.ConfigMap](srv).
			Named("cleanup").
			WithLabelSelector(Label).
			WithFinalizer(Finalizer).
			Complete(cleanup{})
	}
	if err == nil {
		err = srv.Serve(ctrl.SetupSignalHandler(), *address)
	}
	if err != nil {
		ctrl.Log.Error(err, "Stopped")
		os.Exit(1)
	}
}
