package run

import (
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/polyop/polyop/internal/sidecarprocess"
)

// stopTimeout is how long a child process gets to exit after it is asked to
// before it is killed.
const stopTimeout = 15 * time.Second

// child is a long-running process polyop run started: the host. It runs in a
// process group of its own, so that a Ctrl-C in the terminal reaches only
// polyop run, which then stops its children in order.
type child struct {
	name string
	cmd  *exec.Cmd

	// done is closed once the process has exited; err is then its exit error.
	done chan struct{}
	err  error
}

// startChild starts the program path with args, its output prefixed with
// "[name] ". exited receives the child when it exits, whatever the reason.
func startChild(c *console, name, path string, args []string, env []string, exited chan<- *child) (*child, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = env
	stdout, stderr := c.prefixed("[" + name + "] ")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s: %w", name, err)
	}
	ch := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		ch.err = cmd.Wait()
		_ = stdout.Close()
		_ = stderr.Close()
		close(ch.done)
		exited <- ch
	}()
	return ch, nil
}

// exitError describes how a child that was not asked to stop ended.
func (ch *child) exitError() error {
	if ch.err == nil {
		return fmt.Errorf("the %s exited", ch.name)
	}
	return fmt.Errorf("the %s exited: %w", ch.name, ch.err)
}

// stop asks the child's process group to exit (as Ctrl-C does) and kills it
// if it has not within stopTimeout. It returns once the process is gone.
func (ch *child) stop() {
	select {
	case <-ch.done:
	default:
		sidecarprocess.SignalGroup(ch.cmd, sidecarprocess.StopSignal)
		select {
		case <-ch.done:
		case <-time.After(stopTimeout):
			sidecarprocess.SignalGroup(ch.cmd, sidecarprocess.KillSignal)
			<-ch.done
		}
	}
	// Whatever the child started goes with it.
	sidecarprocess.SignalGroup(ch.cmd, sidecarprocess.KillSignal)
}

// environ returns this process's environment with the given variables set.
func environ(set map[string]string) []string {
	env := os.Environ()
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}
