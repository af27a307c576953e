//go:build !unix

package cli

import (
	"os"
	"os/exec"
)

var (
	terminate = os.Kill
	kill      = os.Kill
)

func ownProcessGroup(*exec.Cmd) {}

// signalGroup ends cmd's process: without process groups, the processes it
// started are not reached.
func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}
