// Command host is the polyop host: a generic controller-runtime manager that
// hands every reconcile of the kinds its sidecar declares to the sidecar, over
// gRPC.
//
// Usage:
//
//	host [--sidecar-address unix:///var/run/polyop/sidecar.sock] [--kubeconfig …] [flags]
//
// Run host --help for every flag.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/polyop/polyop/internal/host"
)

func main() {
	opts := host.NewOptions()
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	version := flag.Bool("version", false, "Print the host's version and exit.")
	flag.Parse()
	if *version {
		fmt.Println(host.Version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fail(fmt.Errorf("loading a kubeconfig: %w", err))
	}
	if err := host.Run(ctrl.SetupSignalHandler(), cfg, opts); err != nil {
		fail(err)
	}
}

// fail reports why the host stops, once, plainly, and exits non-zero.
func fail(err error) {
	fmt.Fprintf(os.Stderr, "polyop host: %v\n", err)
	os.Exit(1)
}
