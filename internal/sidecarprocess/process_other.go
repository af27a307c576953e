//go:build !unix

package sidecarprocess

import (
	"os"
	"os/exec"
)

// Without process groups, StopSignal and KillSignal both kill the process.
var (
	StopSignal = os.Kill
	KillSignal = os.Kill
)

func ownProcessGroup(*exec.Cmd) {}

// SignalGroup ends cmd's process: without process groups, the processes it
// started are not reached.
func SignalGroup(cmd *exec.Cmd, sig os.Signal) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}
