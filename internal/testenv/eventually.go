package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// PollInterval is how often Eventually and Consistently look at their
// condition.
const PollInterval = 50 * time.Millisecond

// Condition is what Eventually and Consistently poll, in one of two shapes:
// a check that returns nil when the condition holds and otherwise an error
// saying what it saw, or a function that reports whether the condition holds
// and what it saw. A check's ctx ends with the wait.
type Condition interface {
	func(ctx context.Context) error | func() (ok bool, seen string)
}

// Eventually polls cond every PollInterval until it holds, and fails t when
// it has not within timeout, naming what was awaited and what cond saw last.
func Eventually[C Condition](t testing.TB, timeout time.Duration, what string, cond C) {
	t.Helper()
	check := checkOf(cond)
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not true within %s; last seen: %v", what, timeout, last)
	}
}

// Consistently polls cond every PollInterval for duration, and fails t as soon
// as it does not hold, naming what should have held and what cond saw. Use it
// only for a state the test has brought about and expects to last (a server
// it stopped stays unreachable), never to conclude that something did not
// happen from a quiet window alone.
func Consistently[C Condition](t testing.TB, duration time.Duration, what string, cond C) {
	t.Helper()
	check := checkOf(cond)
	var broke error
	err := wait.PollUntilContextTimeout(context.Background(), PollInterval, duration, true, func(ctx context.Context) (bool, error) {
		if err := check(ctx); err != nil && ctx.Err() == nil {
			broke = err
			return true, nil
		}
		return false, nil
	})
	if err == nil {
		t.Fatalf("%s: stopped holding within %s: %v", what, duration, broke)
	}
}

// checkOf turns either shape of Condition into a check.
func checkOf[C Condition](cond C) func(context.Context) error {
	switch c := any(cond).(type) {
	case func(context.Context) error:
		return c
	case func() (bool, string):
		return func(context.Context) error {
			if ok, seen := c(); !ok {
				return errors.New(seen)
			}
			return nil
		}
	}
	panic(fmt.Sprintf("testenv: unsupported condition type %T", cond))
}

// WorkingDir is the test's working directory, against which relative paths
// (relative unix socket addresses among them) are resolved.
func WorkingDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
