//go:build unix && !linux

package run

import "syscall"

// childProcAttr puts a child in a process group of its own.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
