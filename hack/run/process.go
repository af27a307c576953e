package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// stopTimeout is how long a child process gets to exit after SIGTERM before
// it is killed.
const stopTimeout = 15 * time.Second

// child is a long-running process the command started: the host or the
// sidecar. It runs in a process group of its own, so that a Ctrl-C in the
// terminal reaches only this command, which then stops its children in order.
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

// stop asks the child to exit with SIGTERM and kills it if it has not within
// stopTimeout. It returns once the process is gone.
func (ch *child) stop() {
	select {
	case <-ch.done:
		return
	default:
	}
	ch.signal(syscall.SIGTERM)
	select {
	case <-ch.done:
	case <-time.After(stopTimeout):
		ch.signal(syscall.SIGKILL)
		<-ch.done
	}
}

// signal sends sig to the child's process group, so that whatever it started
// goes too.
func (ch *child) signal(sig syscall.Signal) {
	if err := syscall.Kill(-ch.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = ch.cmd.Process.Signal(sig)
	}
}

// environ returns this process's environment with the given variables set.
func environ(set map[string]string) []string {
	env := os.Environ()
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}
