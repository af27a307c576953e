package benchmark

import (
	"bufio"
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
)

// outputLimit bounds the output a process keeps in memory; the log file, when
// there is one, has all of it.
const outputLimit = 1 << 20

// process is a running child process of the harness: the operator, the host
// or a sidecar. Its pid gives its CPU time and memory through /proc.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu  sync.Mutex
	out strings.Builder
}

// startProcess starts bin with args and, when env is not empty, the
// harness's environment plus env, keeping its output (see output) and,
// when logPath is set, writing it to that file too.
func startProcess(name, bin string, args, env []string, logPath string) (*process, error) {
	p := &process{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	r, w := io.Pipe()
	p.cmd.Stdout = w
	p.cmd.Stderr = w
	// The processes die with the harness, however it ends.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var logFile *os.File
	if logPath != "" {
		f, err := os.Create(logPath)
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
		}
		// Keep draining, so that the process never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, r)
	}()
	go func() {
		p.err = p.cmd.Wait()
		_ = w.Close()
		<-scanned
		if logFile != nil {
			_ = logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// pid is the process's id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// output is what the process has printed so far (the first MiB of it).
func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError says how the process ended, once it has.
func (p *process) exitError() error {
	if p.err == nil {
		return fmt.Errorf("%s exited", p.name)
	}
	return fmt.Errorf("%s exited: %w", p.name, p.err)
}

// waitForOutput waits until the process prints s.
func (p *process) waitForOutput(ctx context.Context, s string) error {
	for {
		if strings.Contains(p.output(), s) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never printed %q: %w", p.name, s, ctx.Err())
		case <-p.done:
			if strings.Contains(p.output(), s) {
				return nil
			}
			return fmt.Errorf("%s, before printing %q; its output:\n%s", p.exitError(), s, tail(p.output(), 40))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM, waits up to 10s, then kills the process.
func (p *process) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errProcessExited is returned when a process of a run exits before the run
// ends.
var errProcessExited = errors.New("a process of the run exited")
