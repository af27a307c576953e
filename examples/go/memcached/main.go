package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/polyop/polyop/examples/go/memcached/api/v1"
	"github.com/polyop/polyop/examples/go/memcached/internal/controller"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// name is the sidecar's name, as the host sees it.
const name = "memcached-operator"

func main() {
	address := flag.String("address", sidecar.DefaultAddress,
		"Where to serve the sidecar API: unix:///abs/path.sock, unix:rel/path.sock, tcp://host:port or host:port.")
	image := flag.String("image", controller.DefaultImage, "The memcached image of the deployments.")
	standalone := flag.Bool("standalone", false,
		"Run the same reconciler in an ordinary controller-runtime manager against the cluster of --kubeconfig, "+
			"with controller-runtime's own client, instead of serving a polyop host.")
	namespace := flag.String("namespace", "", "With --standalone, watch only this namespace. Defaults to every namespace.")
	opts := sidecar.Options{Name: name}
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	ctx := ctrl.SetupSignalHandler()
	var err error
	if *standalone {
		err = runManager(ctx, *namespace, *image)
	} else {
		err = serve(ctx, opts, *address, *image)
	}
	if err != nil {
		ctrl.Log.Error(err, "Stopped")
		os.Exit(1)
	}
}

// newScheme returns a scheme with the built-in kinds and Memcached.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

// newServer returns the sidecar with the Memcached controller registered.
func newServer(opts sidecar.Options, image string) (*sidecar.Server, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	opts.Scheme = scheme
	srv, err := sidecar.New(opts)
	if err != nil {
		return nil, err
	}
	if err := (&controller.MemcachedReconciler{Image: image}).SetupWithServer(srv); err != nil {
		return nil, err
	}
	return srv, nil
}

func serve(ctx context.Context, opts sidecar.Options, address, image string) error {
	srv, err := newServer(opts, image)
	if err != nil {
		return err
	}
	return srv.Serve(ctx, address)
}

// runManager runs the reconciler in a controller-runtime manager, as the
// operator-sdk tutorial's operator does: no host, no sidecar.
func runManager(ctx context.Context, namespace, image string) error {
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	mgrOpts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}
	if namespace != "" {
		mgrOpts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}}
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := (&controller.MemcachedReconciler{Image: image}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the controller: %w", err)
	}
	return mgr.Start(ctx)
}
