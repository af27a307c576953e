// Command run runs polyop's example operator end to end, the way `make run`
// does: it builds the host and the maintenancewindow sidecar, installs the
// example's CRDs, starts both processes, applies the example's samples with
// kubectl, waits until they are Ready and prints them. Then it keeps
// everything running until it is interrupted, so the example can be poked at
// with kubectl.
//
// It runs against the cluster the kubeconfig points at (--kubeconfig,
// $KUBECONFIG or ~/.kube/config, in that order). When there is none, or with
// --envtest, it starts a local control plane (kube-apiserver and etcd, through
// controller-runtime's envtest, from $KUBEBUILDER_ASSETS or
// bin/k8s-<version>) and writes a kubeconfig for it to
// <bin-dir>/run/kubeconfig.
//
// Usage:
//
//	go run ./hack/run [flags]
//
// The flags are:
//
//	--kubeconfig string       kubeconfig of the cluster to run against
//	--envtest                 start a local control plane even if a cluster is configured
//	--exit-when-reconciled    exit once the samples are Ready (exit status 0) instead of running on
//	--timeout duration        how long to wait for the samples to be Ready (default 1m0s)
//	--bin-dir string          where the host and the sidecar are built (default <repository>/bin)
//	--example string          the example to run, relative to the repository (default examples/go/maintenancewindow)
//
// Any failure, or a sample that is not Ready in time, ends it with a message
// and exit status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// k8sVersion is the version of the control-plane binaries `make envtest`
// builds into bin/k8s-<version>; keep it in step with K8S_VERSION in the
// Makefile.
const k8sVersion = "1.37.2"

// options are the command's flags.
type options struct {
	// kubeconfig is the kubeconfig of the cluster to run against. Defaults to
	// $KUBECONFIG, then ~/.kube/config.
	kubeconfig string

	// envtest starts a local control plane even when a cluster is configured.
	envtest bool

	// exitWhenReconciled ends the run, successfully, once every sample is Ready.
	exitWhenReconciled bool

	// timeout bounds the wait for the samples to be Ready. Defaults to a minute.
	timeout time.Duration

	// binDir is where the host and the sidecar are built, and where the local
	// control plane's kubeconfig is written (run/kubeconfig). Defaults to the
	// repository's bin/.
	binDir string

	// example is the example to run, relative to the repository root: its
	// main package, config/crd and config/samples.
	// Defaults to examples/go/maintenancewindow.
	example string
}

func main() {
	var o options
	// A flag set of its own: controller-runtime, which envtest brings in,
	// registers a --kubeconfig of its own on the global one.
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to run against (default $KUBECONFIG, then ~/.kube/config; a local control plane when there is none)")
	fs.BoolVar(&o.envtest, "envtest", false, "start a local control plane even if a cluster is configured")
	fs.BoolVar(&o.exitWhenReconciled, "exit-when-reconciled", false, "exit once the samples are Ready instead of running until interrupted")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait for the samples to be Ready")
	fs.StringVar(&o.binDir, "bin-dir", "", "where the host and the sidecar are built (default <repository>/bin)")
	fs.StringVar(&o.example, "example", "examples/go/maintenancewindow", "the example to run, relative to the repository root")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "run: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		os.Exit(2)
	}

	// envtest logs through controller-runtime's logger; the control plane's
	// own failures come back as errors, so its chatter is not needed.
	logf.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()

	r := newRunner(o, os.Stdout, os.Stderr)
	if err := r.run(ctx); err != nil {
		r.console.errorf("%v", err)
		if errors.Is(err, errInterrupted) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}
