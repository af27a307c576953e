package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// annotationFreezeHost makes a reconcile of the window stop (SIGSTOP) the
// process whose ID the --freeze-pid-file holds, as a pause of the host's
// process or machine would: "during" the call, before the answer is sent,
// which is then sent a second later into the stopped host's socket; or
// "after" it, right after the answer is sent, while the host reads it and
// makes its writes. The file is removed, so it happens once per file.
const annotationFreezeHost = "e2e.polyop.dev/freeze-host"

// The values of annotationFreezeHost.
const (
	freezeDuring = "during"
	freezeAfter  = "after"
)

// freezeWait is how long a reconcile that stopped its host "during" the call
// waits before answering.
const freezeWait = time.Second

// freezer stops the process the file at path names.
type freezer struct{ path string }

// take reads and removes the file, returning the process ID it held; 0 when
// there is none (no file, or the freeze already happened).
func (f freezer) take() (int, error) {
	if f.path == "" {
		return 0, nil
	}
	// Renamed first, so that of two calls at once only one takes it.
	taken := fmt.Sprintf("%s.taken-%d", f.path, time.Now().UnixNano())
	if err := os.Rename(f.path, taken); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	defer os.Remove(taken)
	b, err := os.ReadFile(taken)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("--freeze-pid-file %s: %q is not a process ID", f.path, b)
	}
	return pid, nil
}

// freeze acts on the annotation's value when for a reconcile: it stops the
// process now ("during", then waits before the answer) or returns a
// function that stops it, to run once the answer is sent ("after").
func (f freezer) freeze(when string) (afterAnswer func(), err error) {
	if when != freezeDuring && when != freezeAfter {
		return nil, fmt.Errorf("annotation %s: %q is neither %q nor %q", annotationFreezeHost, when, freezeDuring, freezeAfter)
	}
	pid, err := f.take()
	if err != nil || pid == 0 {
		return nil, err
	}
	stop := func() {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			fmt.Fprintf(os.Stderr, "testsidecar: stopping process %d: %v\n", pid, err)
			return
		}
		fmt.Fprintf(os.Stderr, "testsidecar: stopped process %d %s a call (annotation %s)\n", pid, when, annotationFreezeHost)
	}
	if when == freezeDuring {
		stop()
		time.Sleep(freezeWait)
		return nil, nil
	}
	// The SDK sends the answer when Reconcile returns; the stop comes a
	// moment after, while the host reads it.
	return func() { time.AfterFunc(time.Millisecond, stop) }, nil
}
