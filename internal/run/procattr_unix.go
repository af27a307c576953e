//go:build unix && !linux

package cli

import "syscall"

// childProcAttr puts a child in a process group of its own.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
