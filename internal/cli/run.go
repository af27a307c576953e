package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/polyop/polyop/internal/scaffold"
)

// ReadyLine is what polyop run prints once the host serves (and its webhooks
// are wired): scripts and tests wait for it.
const ReadyLine = "polyop run is ready"

// runOptions are polyop run's flags.
type runOptions struct {
	// projectDir is a folder of the project (its PROJECT file is there or
	// above). Defaults to the working directory.
	projectDir string

	// kubeconfig is the kubeconfig of the cluster to run against. Defaults to
	// $KUBECONFIG, then ~/.kube/config; with none, a local control plane.
	kubeconfig string

	// local starts a local control plane even when a cluster is configured.
	local bool

	// sidecarAddress attaches to a sidecar the user runs, instead of building
	// and starting the project's. Defaults to "": the project's.
	sidecarAddress string

	// hostBinary is the host to run. Defaults to "": this polyop (polyop host).
	hostBinary string

	// applySamples applies config/samples once the host runs, waits for them
	// to be Ready and prints them.
	applySamples bool

	// exitWhenReady ends the run, successfully, once the host serves and,
	// with applySamples, every sample is Ready.
	exitWhenReady bool

	// timeout bounds the wait for the sidecar, the host and the samples.
	// Defaults to 2 minutes.
	timeout time.Duration

	// hostArgs are more flags for the host (after --).
	hostArgs []string
}

// NewRunCommand returns polyop run.
func NewRunCommand() *cobra.Command {
	o := runOptions{}
	cmd := &cobra.Command{
		Use:   "run [flags] [-- host flags]",
		Short: "Run the project's operator locally: its CRDs, its sidecar and the host, with webhooks",
		Long: `Run runs the operator of the polyop project in the working directory (the
folder of its PROJECT file, or one below it) the way it runs in a cluster, on
your machine:

  1. the cluster: the one your kubeconfig names (--kubeconfig, $KUBECONFIG,
     ~/.kube/config), or, when there is none or with --local, a local control
     plane (kube-apiserver and etcd) whose kubeconfig it prints. The control
     plane's binaries come from $KUBEBUILDER_ASSETS when set; otherwise polyop
     builds them from source with Go, once, into your cache directory
     (` + "`~/.cache/polyop/k8s-<version>`" + ` on Linux): the first build takes several minutes
     and prints its progress;
  2. the project's CRDs (config/crd), installed with server-side apply;
  3. the sidecar, built and started as the PROJECT file says (sidecar.build,
     sidecar.command), on a unix socket in a temporary directory; or, with
     --sidecar-address, one you run yourself (under a debugger, say);
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

Flags after -- go to the host (polyop host --help lists them).`,
		Example: `  # Run the project against a local control plane (or your cluster) until Ctrl-C
  polyop run

  # Apply config/samples, wait until each is Ready, print them and exit (for scripts)
  polyop run --apply-samples --exit-when-ready

  # Always on a local control plane, with the control plane's binaries at hand
  KUBEBUILDER_ASSETS=$HOME/k8s/1.37.2 polyop run --local

  # Attach to a sidecar you run yourself, e.g. under a debugger
  dlv debug . -- --address tcp://127.0.0.1:9000   # in another terminal
  polyop run --sidecar-address tcp://127.0.0.1:9000

  # More flags for the host
  polyop run -- --zap-log-level=debug`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash != 0 && len(args) > 0 {
				return fmt.Errorf("unexpected arguments %q: flags for the host come after --", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.hostArgs = args
			// envtest logs through controller-runtime's logger; the control
			// plane's own failures come back as errors.
			logf.SetLogger(logr.Discard())
			return newRunner(o, cmd.OutOrStdout(), cmd.ErrOrStderr()).run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.projectDir, "project-dir", ".", "A folder of the project: its PROJECT file is there or in a folder above it.")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "The kubeconfig of the cluster to run against (default $KUBECONFIG, then ~/.kube/config; a local control plane when there is none).")
	f.BoolVar(&o.local, "local", false, "Start a local control plane even when a cluster is configured.")
	f.StringVar(&o.sidecarAddress, "sidecar-address", "", "Attach to the sidecar serving at this address (unix:///path.sock or tcp://host:port) instead of building and starting the project's.")
	f.StringVar(&o.hostBinary, "host-binary", "", "The host program to run (default: this polyop, as polyop host).")
	f.BoolVar(&o.applySamples, "apply-samples", false, "Apply config/samples with kubectl once the host runs, wait for each to be Ready and print them.")
	f.BoolVar(&o.exitWhenReady, "exit-when-ready", false, "Exit (status 0) once the host serves and, with --apply-samples, every sample is Ready, instead of running until interrupted.")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "How long to wait for the sidecar, the host and each step (the samples to be Ready).")
	return cmd
}

// errInterrupted ends a run that a signal stopped before it was up.
var errInterrupted = errors.New("interrupted")

// runner is one run of polyop run.
type runner struct {
	o       runOptions
	console *console

	// mu guards what forceStop reads while the run goes on: the processes
	// and the cluster are set under it.
	mu sync.Mutex

	project *scaffold.Project
	root    string // the project's root

	tmpDir   string // the run's own files: kubeconfig, certificates
	cluster  *runCluster
	kubectl  string
	sidecar  *SidecarProcess
	address  string // the sidecar's address
	host     *child
	hostAddr hostAddresses
	exited   chan *child // receives the host when it exits
	webhooks *localWebhooks
}

func newRunner(o runOptions, stdout, stderr io.Writer) *runner {
	return &runner{
		o:       o,
		console: &console{stdout: stdout, stderr: stderr},
		exited:  make(chan *child, 1),
	}
}

// run does the whole run and tears everything down before it returns.
func (r *runner) run(ctx context.Context) (err error) {
	release := r.forceOnSecondSignal(ctx)
	defer release()
	defer func() {
		if ctx.Err() != nil && err != nil {
			// A signal stopped a step half-way; that step's error says nothing new.
			err = errInterrupted
		}
		err = errors.Join(err, r.teardown())
	}()

	if r.project, r.root, err = scaffold.LoadProject(r.o.projectDir); err != nil {
		return err
	}
	if r.tmpDir, err = os.MkdirTemp("", "polyop-run-"); err != nil {
		return err
	}
	if err := r.startCluster(ctx); err != nil {
		return err
	}
	if err := r.startSidecar(ctx); err != nil {
		return err
	}
	desc, err := r.describe(ctx)
	if err != nil {
		return err
	}
	if err := r.startHost(desc); err != nil {
		return err
	}
	if err := r.waitHostReady(ctx); err != nil {
		return err
	}
	if r.webhooks != nil {
		if err := r.webhooks.install(ctx, r.cluster.client, r.console); err != nil {
			return err
		}
	}
	r.printReady()

	var samples []sample
	if r.o.applySamples {
		if samples, err = r.applySamples(ctx); err != nil {
			return err
		}
		if err := r.waitReady(ctx, samples); err != nil {
			return err
		}
		if err := r.show(ctx, samples); err != nil {
			return err
		}
	}
	if r.o.exitWhenReady {
		r.console.printf("exiting as asked (--exit-when-ready)")
		return nil
	}

	r.printHints(samples)
	select {
	case <-ctx.Done():
		r.console.printf("stopping (press Ctrl-C again to force)")
		return nil
	case ch := <-r.exited:
		return ch.exitError()
	case <-r.sidecarDone():
		return r.sidecar.ExitedError()
	}
}

// sidecarDone is closed when the sidecar polyop started exits; never for one
// the user runs.
func (r *runner) sidecarDone() <-chan struct{} {
	if r.sidecar == nil {
		return nil
	}
	return r.sidecar.Done()
}

// startSidecar builds and starts the project's sidecar, unless the user runs
// their own (--sidecar-address).
func (r *runner) startSidecar(ctx context.Context) error {
	if r.o.sidecarAddress != "" {
		r.address = r.o.sidecarAddress
		r.console.printf("using the sidecar at %s (--sidecar-address)", r.address)
		return nil
	}
	if build := r.project.Sidecar.Build; len(build) > 0 {
		r.console.printf("building the sidecar: %s", strings.Join(build, " "))
		stdout, stderr := r.console.prefixed("[build] ")
		err := buildSidecar(ctx, r.project, r.root, stdout, stderr)
		_, _ = stdout.Close(), stderr.Close()
		if err != nil {
			return err
		}
	}
	stdout, _ := r.console.prefixed("[sidecar] ")
	sc, err := StartSidecarIn(r.root, r.project.Sidecar.Command, stdout, "")
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.sidecar = sc
	r.mu.Unlock()
	r.address = sc.Address
	r.console.printf("started the sidecar (pid %d) on %s: %s", sc.cmd.Process.Pid, sc.Address, strings.Join(r.project.Sidecar.Command, " "))
	return nil
}

// forceOnSecondSignal makes a signal that comes after ctx is done (the
// first one) stop the run at once: it kills the processes the run started
// and exits, without waiting for them to stop by themselves. Call release
// when the run is over.
func (r *runner) forceOnSecondSignal(ctx context.Context) (release func()) {
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-finished:
			return
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sig)
		select {
		case <-sig:
			r.forceStop()
			os.Exit(130)
		case <-finished:
		}
	}()
	return func() { close(finished) }
}

// forceStop kills the host, the sidecar and the control plane, and removes
// the run's files, saying which webhook configurations it leaves behind.
func (r *runner) forceStop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.console.errorf("stopping at once (second signal)")
	if r.host != nil {
		signalGroup(r.host.cmd, kill)
	}
	if r.sidecar != nil {
		signalGroup(r.sidecar.cmd, kill)
		_ = os.RemoveAll(r.sidecar.dir)
	}
	if r.webhooks != nil && r.cluster != nil && r.cluster.stopLocal == nil {
		for _, obj := range r.webhooks.applied {
			r.console.errorf("left behind: %s %s; delete it (kubectl delete %s %s), or its failure policy may refuse writes",
				obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), strings.ToLower(obj.GetObjectKind().GroupVersionKind().Kind), obj.GetName())
		}
	}
	if r.cluster != nil {
		_ = r.cluster.stop()
	}
	if r.tmpDir != "" {
		_ = os.RemoveAll(r.tmpDir)
	}
}

// teardown stops whatever the run started: the webhook configurations first,
// so that no write is refused once the host is gone, then the host (no
// reconcile is in flight when the sidecar goes), the sidecar and the cluster.
func (r *runner) teardown() error {
	var errs []error
	if r.webhooks != nil {
		if err := r.webhooks.uninstall(r.cluster.client, r.console); err != nil {
			errs = append(errs, err)
		}
	}
	if r.host != nil {
		r.host.stop()
		r.console.printf("the host stopped")
	}
	if r.sidecar != nil {
		r.sidecar.Stop()
		r.console.printf("the sidecar stopped")
	}
	if r.cluster != nil {
		if err := r.cluster.stop(); err != nil {
			errs = append(errs, err)
		} else if r.cluster.stopLocal != nil {
			r.console.printf("the local control plane stopped")
		}
	}
	if r.tmpDir != "" {
		if err := os.RemoveAll(r.tmpDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
