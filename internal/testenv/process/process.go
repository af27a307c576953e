package process

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Logger receives a process's output, line by line (a *testing.T fits).
type Logger interface {
	Logf(format string, args ...any)
}

// outputLimit bounds the output a Process keeps in memory; a log file, when
// there is one, has all of it.
const outputLimit = 1 << 20

// Process is a running child process whose output is kept and mirrored.
type Process struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu  sync.Mutex
	out bytes.Buffer
}

// Options are the optional settings of StartWith.
type Options struct {
	// Logger receives each line of output, prefixed with the process's name.
	// Defaults to none.
	Logger Logger
	// Env is added to this process's environment. Defaults to none.
	Env []string
	// LogPath is a file that receives all of the output. Defaults to none.
	LogPath string
	// Dir is the process's working directory. Defaults to this process's.
	Dir string
}

// Start starts bin with args. Each line of its output is kept (see Output)
// and passed to log with name as a prefix, if log is not nil.
func Start(log Logger, name, bin string, args ...string) (*Process, error) {
	return StartWith(name, bin, args, Options{Logger: log})
}

// StartWith starts bin with args and opts. The process is killed if the
// calling process dies.
func StartWith(name, bin string, args []string, opts Options) (*Process, error) {
	p := &Process{Name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	if len(opts.Env) > 0 {
		p.cmd.Env = append(os.Environ(), opts.Env...)
	}
	p.cmd.Dir = opts.Dir
	r, w := io.Pipe()
	p.cmd.Stdout = w
	p.cmd.Stderr = w
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var logFile *os.File
	if opts.LogPath != "" {
		f, err := os.Create(opts.LogPath)
		if err != nil {
			return nil, err
		}
		logFile = f
	}
	if err := p.cmd.Start(); err != nil {
		if logFile != nil {
			_ = logFile.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			if logFile != nil {
				_, _ = logFile.WriteString(line + "\n")
			}
			p.mu.Lock()
			if p.out.Len() < outputLimit {
				p.out.WriteString(line + "\n")
			}
			p.mu.Unlock()
			if opts.Logger != nil {
				opts.Logger.Logf("[%s] %s", name, line)
			}
		}
		// Keep draining, so that the process never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, r)
	}()
	go func() {
		p.err = p.cmd.Wait()
		_ = w.Close()
		<-scanned // every line is logged before Wait returns
		if logFile != nil {
			_ = logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's id, for reading /proc.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// ExitError says how the process ended, once it has.
func (p *Process) ExitError() error {
	if p.err == nil {
		return fmt.Errorf("%s exited", p.Name)
	}
	return fmt.Errorf("%s exited: %w", p.Name, p.err)
}

// Output is everything the process has printed so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process to exit, at most timeout, and returns its exit
// code (-1 when it was killed by a signal).
func (p *Process) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s did not exit within %s", p.Name, timeout)
	}
	var exitErr *exec.ExitError
	if errors.As(p.err, &exitErr) {
		return exitErr.ExitCode(), nil
	}
	return 0, p.err
}

// Stop sends SIGTERM and waits up to 10s, then kills the process.
func (p *Process) Stop() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if _, err := p.Wait(10 * time.Second); err != nil {
		p.Kill()
	}
}

// Signal sends sig to the process: SIGSTOP and SIGCONT pause and resume it,
// as a frozen machine or a long garbage-collection pause would.
func (p *Process) Signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling %s: %w", p.Name, err)
	}
	return nil
}

// Kill kills the process at once (SIGKILL) and waits for it.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// WaitForOutput waits until the process's output contains s.
func (p *Process) WaitForOutput(ctx context.Context, s string) error {
	var exited bool
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		exited = p.Exited()
		return exited || strings.Contains(p.Output(), s), nil
	})
	switch {
	case strings.Contains(p.Output(), s):
		return nil
	case exited:
		return fmt.Errorf("%w, before printing %q; its output:\n%s", p.ExitError(), s, Tail(p.Output(), 40))
	}
	return fmt.Errorf("%s never printed %q: %w", p.Name, s, err)
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
