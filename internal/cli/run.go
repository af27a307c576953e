package cli

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/polyop/polyop/internal/controlplane"
	polyoprun "github.com/polyop/polyop/internal/run"
)

// NewRunCommand returns polyop run.
func NewRunCommand() *cobra.Command {
	o := polyoprun.Options{}
	cmd := &cobra.Command{
		Use:   "run [flags] [-- host flags]",
		Short: "Run the project's operator locally: its CRDs, its sidecar and the host, with webhooks",
		Long: `Run runs the operator of the polyop project in the working directory (the
folder of its PROJECT file, or one below it) the way it runs in a cluster, on
your machine:

  1. the cluster: the one your kubeconfig names (--kubeconfig, $KUBECONFIG,
     ~/.kube/config), or, when there is none or with --local, a local control
     plane (kube-apiserver and etcd) whose kubeconfig it prints. The control
     plane's binaries (kube-apiserver, etcd, kubectl) come from
     $KUBEBUILDER_ASSETS when set, else from your cache directory
     (` + "`~/.cache/polyop/k8s-<version>`" + ` on Linux), where the first run puts them:
     it downloads the envtest release of polyop's Kubernetes version from
     controller-tools' release index, as setup-envtest does, its checksum
     verified (--envtest-index or $POLYOP_ENVTEST_INDEX name a mirror of the
     index); when that fails and Go is installed, it builds them from source
     instead, which takes several minutes. Either prints its progress;
  2. the project's CRDs (config/crd), installed with server-side apply;
  3. the sidecar, built and started as the PROJECT file says (sidecar.build,
     sidecar.command), on a unix socket in a temporary directory; or, with
     --sidecar-address, one you run yourself (under a debugger, say), which
     it neither builds, starts nor stops;
  4. the host (this polyop's own, or --host-binary), pointed at the sidecar,
     with health probes and metrics over plain HTTP on 127.0.0.1;
  5. when the sidecar declares webhooks or conversions: a CA and a serving
     certificate for 127.0.0.1 in a temporary directory, the host's webhook
     server there, and the webhook configurations and CRD conversion stanzas
     applied once the host serves them (so writes are never refused
     meanwhile).

It prints where everything is, then runs until Ctrl-C, SIGINT or SIGTERM. Then
it removes the webhook configurations first (a webhook left behind with
failurePolicy Fail refuses every write of its kind), restores the CRDs'
conversion, stops the host, the sidecar and the control plane, and removes
the sockets, certificates, kubeconfig and temporary directories. A second
signal stops it at once.

Flags after -- go to the host (polyop host --help lists them).

To step through the sidecar, run it under your language's debugger, serving
on a socket, give that socket to --sidecar-address, and raise the host's
deadline of each Reconcile call (-- --reconcile-timeout=1h; 30s by default,
after which the host discards the answer and calls again): see
https://github.com/polyop/polyop/blob/main/docs/debugging.md for Go (dlv),
Python (debugpy) and Node.js (--inspect), with editors' attach settings.`,
		Example: `  # Run the project against a local control plane (or your cluster) until Ctrl-C
  polyop run

  # Apply config/samples, wait until each is Ready, print them and exit (for scripts)
  polyop run --apply-samples --exit-when-ready

  # Always on a local control plane, with the control plane's binaries at hand
  KUBEBUILDER_ASSETS=$HOME/k8s/1.37.2 polyop run --local

  # Download the control plane's binaries from a mirror of controller-tools' envtest index
  POLYOP_ENVTEST_INDEX=https://mirror.example.com/envtest-releases.yaml polyop run

  # Debug the sidecar: start it under its debugger in another terminal, by language,
  dlv debug ./cmd/sidecar -- --address unix:///tmp/fleet/sidecar.sock                          # Go
  .venv/bin/python -m debugpy --listen 5678 -m fleet --address unix:///tmp/fleet/sidecar.sock  # Python
  node --inspect dist/main.js --address unix:///tmp/fleet/sidecar.sock                         # TypeScript
  # then run the rest against it, with time to step through each Reconcile call
  polyop run --sidecar-address unix:///tmp/fleet/sidecar.sock -- --reconcile-timeout=1h

  # More flags for the host
  polyop run -- --zap-log-level=debug`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash != 0 && len(args) > 0 {
				return fmt.Errorf("unexpected arguments %q: flags for the host come after --", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.HostArgs = args
			// envtest logs through controller-runtime's logger; the control
			// plane's own failures come back as errors.
			logf.SetLogger(logr.Discard())
			return polyoprun.Run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ProjectDir, "project-dir", ".", "A folder of the project: its PROJECT file is there or in a folder above it.")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "The kubeconfig of the cluster to run against (default $KUBECONFIG, then ~/.kube/config; a local control plane when there is none).")
	f.BoolVar(&o.Local, "local", false, "Start a local control plane even when a cluster is configured.")
	f.StringVar(&o.EnvtestIndex, "envtest-index", "", "The envtest release index (controller-tools' envtest-releases.yaml, or a mirror of it) to download the local control plane from (default $"+controlplane.IndexEnv+", then controller-tools').")
	f.StringVar(&o.SidecarAddress, "sidecar-address", "", "Attach to the sidecar serving at this address (unix:///path.sock or tcp://host:port) instead of building and starting the project's.")
	f.StringVar(&o.HostBinary, "host-binary", "", "The host program to run (default: this polyop, as polyop host).")
	f.BoolVar(&o.ApplySamples, "apply-samples", false, "Apply config/samples with kubectl once the host runs, wait for each to be Ready and print them.")
	f.BoolVar(&o.ExitWhenReady, "exit-when-ready", false, "Exit (status 0) once the host serves and, with --apply-samples, every sample is Ready, instead of running until interrupted.")
	f.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "How long to wait for the sidecar, the host and each step (the samples to be Ready).")
	return cmd
}
