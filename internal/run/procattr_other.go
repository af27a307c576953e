//go:build !unix

package run

import "syscall"

// childProcAttr: without process groups, a child is started as it is.
func childProcAttr() *syscall.SysProcAttr { return nil }
