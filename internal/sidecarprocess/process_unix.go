//go:build unix

package sidecarprocess

import (
	"os/exec"
	"syscall"
)

// A process is stopped as Ctrl-C stops a program: StopSignal (SIGINT), which
// every SDK handles and `go run` passes on to the program it built and then
// cleans up after (SIGTERM would end `go run` at once, leaving its build
// directory); KillSignal ends it at once.
const (
	StopSignal = syscall.SIGINT
	KillSignal = syscall.SIGKILL
)

// ownProcessGroup starts cmd in a process group of its own, so that the
// processes it starts (the program `go run` builds, a shell's children) are
// stopped with it.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// SignalGroup sends sig to cmd's process group.
func SignalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
}
