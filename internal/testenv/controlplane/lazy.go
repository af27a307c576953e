package controlplane

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// Lazy is a control plane shared by the tests of a package, started the first
// time one of them asks for it, so that a run of the package's other tests
// starts none, and stopped by Main:
//
//	var shared testenv.Lazy
//
//	func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
//
//	func TestX(t *testing.T) { env := shared.Get(t); … }
type Lazy struct {
	// Setup, when set, runs once on the started control plane, e.g. to
	// install CRDs; its error fails every test that asks.
	Setup func(*Env) error

	once sync.Once
	env  *Env
	err  error
}

// Get returns the control plane, starting it on the first call; it fails tb
// if the control plane could not start or be set up.
func (l *Lazy) Get(tb testing.TB) *Env {
	tb.Helper()
	l.once.Do(func() {
		if l.env, l.err = Start(); l.err != nil || l.Setup == nil {
			return
		}
		l.err = l.Setup(l.env)
	})
	if l.err != nil {
		tb.Fatal(l.err)
	}
	return l.env
}

// Main runs the tests and stops the control plane if one of them started it.
// It returns the exit code for os.Exit.
func (l *Lazy) Main(m *testing.M) int {
	code := m.Run()
	if l.env != nil {
		if err := l.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}
	return code
}
