package sidecarprocess

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/sidecar"
)

// AddressFlag is the flag a sidecar command is given its address with, as
// every SDK's entry point and example takes it (--address unix:///….sock).
const AddressFlag = "--address"

// socketName is the name of the sidecar's socket in its temporary directory.
const socketName = "sidecar.sock"

// maxSocketPath is the longest unix socket path StartSidecar uses: the
// systems' limits are 104 (macOS) and 108 (Linux) bytes, with the
// terminating NUL.
const maxSocketPath = 100

// stopGracePeriod is how long Stop waits for the sidecar to exit after
// SIGINT before it kills it: the SDKs stop serving at once on SIGINT, as on
// SIGTERM.
const stopGracePeriod = 5 * time.Second

// SidecarProcess is a sidecar command started on a unix socket in a
// temporary directory of its own. Stop it, on every path: Stop ends the
// process (and the processes it started) and removes the directory.
type SidecarProcess struct {
	// Address is where the sidecar serves: unix:// and the socket's path.
	Address string

	command []string
	dir     string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	output  *tailBuffer
	stop    sync.Once
}

// StartSidecar starts command (a program and its arguments) with
// "--address unix://<temporary directory>/sidecar.sock" appended. The
// sidecar's output is kept (see OutputTail) and copied to logs when logs is
// not nil. The environment's POLYOP_CLUSTER_ADDRESS is not passed on: the
// sidecar's is clusterAddress, or none when it is "" (no cluster).
func StartSidecar(command []string, logs io.Writer, clusterAddress string) (*SidecarProcess, error) {
	return StartSidecarIn("", command, logs, clusterAddress)
}

// StartSidecarIn is StartSidecar with the command run in dir (a relative
// program path, such as bin/sidecar, is then relative to dir). Defaults to
// "": the working directory.
func StartSidecarIn(dir string, command []string, logs io.Writer, clusterAddress string) (*SidecarProcess, error) {
	if len(command) == 0 {
		return nil, errors.New("no sidecar command")
	}
	tmp, err := ShortTempDir("polyop-sidecar-", socketName)
	if err != nil {
		return nil, err
	}
	p := &SidecarProcess{
		Address: "unix://" + filepath.Join(tmp, socketName),
		command: command,
		dir:     tmp,
		done:    make(chan struct{}),
		output:  &tailBuffer{limit: 16 << 10},
	}
	args := append(append([]string{}, command[1:]...), AddressFlag, p.Address)
	p.cmd = exec.Command(command[0], args...)
	p.cmd.Dir = dir
	var out io.Writer = p.output
	if logs != nil {
		out = io.MultiWriter(p.output, logs)
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.Env = withoutClusterAddress(os.Environ())
	if clusterAddress != "" {
		p.cmd.Env = append(p.cmd.Env, clusterAddressEnv+"="+clusterAddress)
	}
	// A process the sidecar started may keep its output open after it
	// exits; Wait does not wait for it longer than this.
	p.cmd.WaitDelay = time.Second
	ownProcessGroup(p.cmd)
	if err := p.cmd.Start(); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("starting the sidecar command %q: %w", strings.Join(command, " "), err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// clusterAddressEnv is the environment variable the host gives its sidecar
// the Cluster service's address in.
const clusterAddressEnv = "POLYOP_CLUSTER_ADDRESS"

// ShortTempDir makes a temporary directory in which socket, a file name,
// makes a path short enough for a unix socket.
func ShortTempDir(prefix, socket string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if len(filepath.Join(dir, socket)) > maxSocketPath {
		// A long TMPDIR (macOS's, say) makes a socket path the system
		// refuses: /tmp makes a short one.
		removeAll(dir)
		return os.MkdirTemp("/tmp", prefix)
	}
	return dir, nil
}

func removeAll(dir string) { _ = os.RemoveAll(dir) }

// withoutClusterAddress is env without POLYOP_CLUSTER_ADDRESS, which would
// give the sidecar the Cluster service of another host.
func withoutClusterAddress(env []string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if !strings.HasPrefix(e, clusterAddressEnv+"=") {
			out = append(out, e)
		}
	}
	return out
}

// Done is closed once the process has exited.
func (p *SidecarProcess) Done() <-chan struct{} { return p.done }

// ExitedError says that the sidecar exited, how, and what it printed last.
func (p *SidecarProcess) ExitedError() error {
	how := "exited"
	if p.err != nil {
		how = "exited: " + p.err.Error()
	}
	return fmt.Errorf("the sidecar command %q %s%s", strings.Join(p.command, " "), how, p.OutputNote())
}

// OutputNote is the end of the sidecar's output, for an error message.
func (p *SidecarProcess) OutputNote() string { return outputNote(p.OutputTail(20)) }

// Kill ends the sidecar and the processes it started at once, with
// KillSignal, and removes its temporary directory without waiting for it to
// exit (a second Ctrl-C to polyop run).
func (p *SidecarProcess) Kill() {
	SignalGroup(p.cmd, KillSignal)
	_ = os.RemoveAll(p.dir)
}

// Pid is the sidecar process's id.
func (p *SidecarProcess) Pid() int { return p.cmd.Process.Pid }

// OutputTail is the last n lines the sidecar printed, at most.
func (p *SidecarProcess) OutputTail(n int) string { return p.output.tail(n) }

// Stop ends the sidecar: SIGINT to it and the processes it started, SIGKILL
// after stopGracePeriod, then removes its temporary directory and socket. It
// may be called more than once.
func (p *SidecarProcess) Stop() {
	p.stop.Do(func() {
		select {
		case <-p.done:
		default:
			SignalGroup(p.cmd, StopSignal)
			select {
			case <-p.done:
			case <-time.After(stopGracePeriod):
				SignalGroup(p.cmd, KillSignal)
				<-p.done
			}
		}
		// `go run` leaves the program it built behind when it is killed:
		// the group is ended as a whole, whatever its leader did.
		SignalGroup(p.cmd, KillSignal)
		_ = os.RemoveAll(p.dir)
	})
}

// tailBuffer keeps the last limit bytes written to it, at least.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - 2*b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.limit:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(b.buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// WaitServing waits up to timeout for the sidecar c calls to serve, and
// gives up as soon as done (the sidecar process's Done, or nil for a sidecar
// polyop did not start) is closed: a process that exited will never serve.
func WaitServing(ctx context.Context, c *sidecar.Client, done <-chan struct{}, timeout time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return c.WaitReady(ctx, timeout, logr.Discard())
}

// Build runs the PROJECT file's sidecar.build, if any, in the
// project's root, with its output to stdout and stderr. A failure names the
// command and where it comes from.
func Build(ctx context.Context, p *scaffold.Project, root string, stdout, stderr io.Writer) error {
	build := p.Sidecar.Build
	if len(build) == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, build[0], build[1:]...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the sidecar: %q (sidecar.build of %s) failed: %w",
			strings.Join(build, " "), filepath.Join(root, scaffold.ProjectFile), err)
	}
	return nil
}
