package run

import "syscall"

// childProcAttr puts a child in a process group of its own and has the kernel
// send it SIGTERM should polyop die without stopping it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
