package benchmark

import (
	"errors"

	"github.com/polyop/polyop/internal/testenv"
)

// process is a running child process of the harness: the operator, the host
// or a sidecar. Its pid gives its CPU time and memory through /proc.
type process = testenv.Process

// startProcess starts bin with args and, when env is not empty, the
// harness's environment plus env, keeping its output and, when logPath is
// set, writing it to that file too.
func startProcess(name, bin string, args, env []string, logPath string) (*process, error) {
	return testenv.StartProcessWith(name, bin, args, testenv.ProcessOptions{Env: env, LogPath: logPath})
}

// tail returns the last n lines of s.
func tail(s string, n int) string { return testenv.Tail(s, n) }

// errProcessExited is returned when a process of a run exits before the run
// ends.
var errProcessExited = errors.New("a process of the run exited")
