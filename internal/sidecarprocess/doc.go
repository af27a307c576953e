// Package sidecarprocess starts a sidecar command on this machine, as polyop
// run, polyop render and polyop generate do: on a unix socket in a temporary
// directory of its own (StartSidecar, StartSidecarIn, with AddressFlag
// appended), in a process group of its own so that the processes it starts
// are stopped with it, its output kept for error messages.
//
// Build runs a project's sidecar.build, WaitServing waits for a sidecar to
// serve, and Describe builds, starts and asks a project's sidecar to
// describe itself. SignalGroup, StopSignal and KillSignal stop other child
// processes the same way.
package sidecarprocess
