//go:build unix

package cli

import (
	"os/exec"
	"syscall"
)

// The sidecar is stopped as Ctrl-C stops a program: SIGINT, which every SDK
// handles and `go run` passes on to the program it built and then cleans up
// after (SIGTERM would end `go run` at once, leaving its build directory).
const (
	terminate = syscall.SIGINT
	kill      = syscall.SIGKILL
)

// ownProcessGroup starts cmd in a process group of its own, so that the
// processes it starts (the program `go run` builds, a shell's children) are
// stopped with it.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to cmd's process group.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
}
