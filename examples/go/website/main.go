package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1 "github.com/polyop/polyop/examples/go/website/api/v1"
	"github.com/polyop/polyop/examples/go/website/internal/controller"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// name is the sidecar's name, as the host sees it.
const name = "website-operator"

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
	if err == nil {
		err = srv.Serve(ctrl.SetupSignalHandler(), *address)
	}
	if err != nil {
		ctrl.Log.Error(err, "Stopped")
		os.Exit(1)
	}
}

// newServer returns the sidecar with the Website controller registered. The
// scheme holds the built-in kinds, for the children, and Website.
func newServer(opts sidecar.Options) (*sidecar.Server, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	opts.Scheme = scheme
	srv, err := sidecar.New(opts)
	if err != nil {
		return nil, err
	}
	if err := (&controller.WebsiteReconciler{}).SetupWithServer(srv); err != nil {
		return nil, err
	}
	return srv, nil
}
