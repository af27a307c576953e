package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	"github.com/polyop/polyop/examples/go/maintenancewindow/api/v1beta1"
	"github.com/polyop/polyop/examples/go/maintenancewindow/internal/controller"
	webhookv1 "github.com/polyop/polyop/examples/go/maintenancewindow/internal/webhook/v1"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// name is the sidecar's name, as the host sees it.
const name = "maintenancewindow"

func main() {
	address := flag.String("address", sidecar.DefaultAddress,
		"Where to serve the sidecar API: unix:///abs/path.sock, unix:rel/path.sock, tcp://host:port or host:port.")
	opts := sidecar.Options{Name: name}
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	srv, err := newServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := srv.Serve(ctrl.SetupSignalHandler(), *address); err != nil {
		ctrl.Log.Error(err, "Serving the sidecar")
		os.Exit(1)
	}
}

// newServer returns the sidecar with its controller, its webhooks and its
// conversion registered.
func newServer(opts sidecar.Options) (*sidecar.Server, error) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	opts.Scheme = scheme
	srv, err := sidecar.New(opts)
	if err != nil {
		return nil, err
	}
	if err := (&controller.MaintenanceWindowReconciler{}).SetupWithServer(srv); err != nil {
		return nil, err
	}
	// Defaulting and validation at v1, and the conversion between v1 and v1beta1.
	if err := webhookv1.SetupWithServer(srv); err != nil {
		return nil, err
	}
	return srv, nil
}
