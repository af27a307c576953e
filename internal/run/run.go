package run

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/sidecarprocess"
	"github.com/polyop/polyop/internal/version"
)

// HostCommandName is the hidden subcommand that runs the host, as cmd/host
// does: polyop run starts `polyop host`, so that installing polyop is all a
// project needs to run locally.
const HostCommandName = "host"

// ReadyLine is what polyop run prints once the host serves (and its webhooks
// are wired): scripts and tests wait for it.
const ReadyLine = "polyop run is ready"

// Options are polyop run's.
type Options struct {
	// ProjectDir is a folder of the project (its PROJECT file is there or
	// above). Defaults to the working directory.
	ProjectDir string

	// Kubeconfig is the kubeconfig of the cluster to run against. Defaults to
	// $KUBECONFIG, then ~/.kube/config; with none, a local control plane.
	Kubeconfig string

	// Local starts a local control plane even when a cluster is configured.
	Local bool

	// EnvtestIndex is the envtest release index to download the local
	// control plane's binaries from. Defaults to $POLYOP_ENVTEST_INDEX, then
	// controller-tools' (see controlplane.IndexURL).
	EnvtestIndex string

	// SidecarAddress attaches to a sidecar the user runs, instead of building
	// and starting the project's. Defaults to "": the project's.
	SidecarAddress string

	// HostBinary is the host to run. Defaults to "": this polyop (polyop host).
	HostBinary string

	// ApplySamples applies config/samples once the host runs, waits for them
	// to be Ready and prints them.
	ApplySamples bool

	// ExitWhenReady ends the run, successfully, once the host serves and,
	// with ApplySamples, every sample is Ready.
	ExitWhenReady bool

	// Timeout bounds the wait for the sidecar, the host and the samples.
	// Defaults to 2 minutes.
	Timeout time.Duration

	// HostArgs are more flags for the host (after --).
	HostArgs []string
}

// Run runs the project's operator as o says until ctx is done or a signal
// stops it, printing what it does to stdout and stderr, and tears
// everything it started down before it returns.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	return newRunner(o, stdout, stderr).run(ctx)
}

// tmpDirPrefix begins the name of each run's temporary folder, which holds
// the kubeconfig of a local control plane that the run prints for export.
const tmpDirPrefix = "polyop-run-"

// errInterrupted ends a run that a signal stopped before it was up.
var errInterrupted = errors.New("interrupted")

// runner is one run of polyop run.
type runner struct {
	o       Options
	console *console

	// mu guards what forceStop reads while the run goes on: the processes
	// and the cluster are set under it.
	mu sync.Mutex

	project *scaffold.Project
	root    string // the project's root

	tmpDir   string // the run's own files: kubeconfig, certificates
	cluster  *runCluster
	kubectl  string
	sidecar  *sidecarprocess.SidecarProcess
	address  string // the sidecar's address
	host     *child
	hostAddr hostAddresses
	exited   chan *child // receives the host when it exits
	webhooks *localWebhooks
}

func newRunner(o Options, stdout, stderr io.Writer) *runner {
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

	if r.project, r.root, err = scaffold.LoadProject(r.o.ProjectDir); err != nil {
		return err
	}
	if skew := r.project.VersionSkew(version.Version); skew != "" {
		r.console.printf("Warning: %s", skew)
	}
	if r.tmpDir, err = os.MkdirTemp("", tmpDirPrefix); err != nil {
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
	if r.o.ApplySamples {
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
	if r.o.ExitWhenReady {
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
	if r.o.SidecarAddress != "" {
		r.address = r.o.SidecarAddress
		r.console.printf("using the sidecar at %s (--sidecar-address)", r.address)
		return nil
	}
	if build := r.project.Sidecar.Build; len(build) > 0 {
		r.console.printf("building the sidecar: %s", strings.Join(build, " "))
		stdout, stderr := r.console.prefixed("[build] ")
		err := sidecarprocess.Build(ctx, r.project, r.root, stdout, stderr)
		_, _ = stdout.Close(), stderr.Close()
		if err != nil {
			return err
		}
	}
	stdout, _ := r.console.prefixed("[sidecar] ")
	sc, err := sidecarprocess.StartSidecarIn(r.root, r.project.Sidecar.Command, stdout, "")
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.sidecar = sc
	r.mu.Unlock()
	r.address = sc.Address
	r.console.printf("started the sidecar (pid %d) on %s: %s", sc.Pid(), sc.Address, strings.Join(r.project.Sidecar.Command, " "))
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
		sidecarprocess.SignalGroup(r.host.cmd, sidecarprocess.KillSignal)
	}
	if r.sidecar != nil {
		r.sidecar.Kill()
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
