package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// errInterrupted ends a run that a signal stopped before it was up.
var errInterrupted = errors.New("interrupted")

// runner is one run of the command.
type runner struct {
	o       options
	console *console

	root    string // the repository root
	binDir  string
	example string // the example's directory, absolute

	cluster *cluster
	kubectl string
	sidecar *child
	host    *child
	exited  chan *child // receives each child when it exits
	tmpDir  string      // holds the sidecar's socket
}

func newRunner(o options, stdout, stderr io.Writer) *runner {
	return &runner{
		o:       o,
		console: &console{stdout: stdout, stderr: stderr},
		exited:  make(chan *child, 2),
	}
}

// run does the whole run and tears everything down before it returns.
func (r *runner) run(ctx context.Context) (err error) {
	defer func() {
		if ctx.Err() != nil && err != nil {
			// A signal stopped a step half-way; that step's error says nothing new.
			err = errInterrupted
		}
		err = errors.Join(err, r.teardown())
	}()

	if err := r.locate(); err != nil {
		return err
	}
	if err := r.build(ctx); err != nil {
		return err
	}
	if err := r.startCluster(ctx); err != nil {
		return err
	}
	if err := r.startProcesses(); err != nil {
		return err
	}
	samples, err := r.applySamples(ctx)
	if err != nil {
		return err
	}
	if err := r.waitReady(ctx, samples); err != nil {
		return err
	}
	if err := r.show(ctx, samples); err != nil {
		return err
	}
	if r.o.exitWhenReconciled {
		r.console.printf("every sample is Ready; exiting as asked (--exit-when-reconciled)")
		return nil
	}

	r.printHints(samples)
	select {
	case <-ctx.Done():
		r.console.printf("stopping (press Ctrl-C again to force)")
		return nil
	case ch := <-r.exited:
		return ch.exitError()
	}
}

// locate finds the repository and the example.
func (r *runner) locate() error {
	root, err := findRoot()
	if err != nil {
		return err
	}
	r.root = root
	r.binDir = r.o.binDir
	if r.binDir == "" {
		r.binDir = filepath.Join(root, "bin")
	}
	if r.binDir, err = filepath.Abs(r.binDir); err != nil {
		return err
	}
	r.example = filepath.Join(root, filepath.FromSlash(r.o.example))
	if _, err := os.Stat(r.example); err != nil {
		return fmt.Errorf("the example: %w", err)
	}
	return nil
}

// findRoot returns the root of polyop's repository: the nearest folder at or
// above the working directory whose go.mod declares polyop's module.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if module, err := modulePath(filepath.Join(dir, "go.mod")); err == nil && module == "github.com/polyop/polyop" {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside polyop's repository (no go.mod for github.com/polyop/polyop here or above): run it from the repository")
		}
		dir = parent
	}
}

// modulePath returns the module path a go.mod file declares.
func modulePath(goMod string) (string, error) {
	f, err := os.Open(goMod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`), nil
		}
	}
	return "", fmt.Errorf("%s declares no module", goMod)
}

// build builds the host and the example's sidecar into the bin folder.
func (r *runner) build(ctx context.Context) error {
	for _, b := range []struct{ name, pkg string }{
		{"host", "./cmd/host"},
		{sidecarBinary(r.o.example), "./" + filepath.ToSlash(r.o.example)},
	} {
		out := filepath.Join(r.binDir, b.name)
		r.console.printf("building %s from %s", out, b.pkg)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, b.pkg)
		cmd.Dir = r.root
		stdout, stderr := r.console.prefixed("[go build] ")
		cmd.Stdout, cmd.Stderr = stdout, stderr
		err := cmd.Run()
		_, _ = stdout.Close(), stderr.Close()
		if err != nil {
			return fmt.Errorf("building %s: %w", b.pkg, err)
		}
	}
	return nil
}

// sidecarBinary names the example's sidecar binary after the example:
// examples/go/maintenancewindow builds bin/maintenancewindow-sidecar.
func sidecarBinary(example string) string {
	return filepath.Base(filepath.FromSlash(example)) + "-sidecar"
}

// startProcesses starts the sidecar, then the host pointed at it.
func (r *runner) startProcesses() error {
	dir, err := os.MkdirTemp("", "polyop-run-")
	if err != nil {
		return err
	}
	r.tmpDir = dir
	address := "unix://" + filepath.Join(dir, "sidecar.sock")

	env := environ(r.cluster.env)
	r.sidecar, err = startChild(r.console, "sidecar", filepath.Join(r.binDir, sidecarBinary(r.o.example)),
		[]string{"--address", address}, env, r.exited)
	if err != nil {
		return err
	}
	r.console.printf("started the sidecar (pid %d) on %s", r.sidecar.cmd.Process.Pid, address)

	args := append(append([]string{}, r.cluster.kubeconfigArgs...),
		"--sidecar-address", address,
		"--health-probe-bind-address", "127.0.0.1:0",
		"--metrics-bind-address", "0",
	)
	r.host, err = startChild(r.console, "host", filepath.Join(r.binDir, "host"), args, env, r.exited)
	if err != nil {
		return err
	}
	r.console.printf("started the host (pid %d)", r.host.cmd.Process.Pid)
	return nil
}

// teardown stops whatever the run started, the host first so that no
// reconcile is in flight when the sidecar goes, and the cluster last.
func (r *runner) teardown() error {
	var errs []error
	for _, ch := range []*child{r.host, r.sidecar} {
		if ch == nil {
			continue
		}
		ch.stop()
		r.console.printf("the %s stopped", ch.name)
	}
	if r.cluster != nil {
		if err := r.cluster.stop(); err != nil {
			errs = append(errs, err)
		} else if r.cluster.testEnv != nil {
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
