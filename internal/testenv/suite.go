package testenv

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Suite is what the TestMain of an integration test package sets up: a
// control plane with CRDs, a client for it, and the binaries the tests run.
type Suite struct {
	// CRDDirs are installed before the tests run.
	CRDDirs []string
	// FeatureGates are the API server's feature gates to turn on, by name.
	FeatureGates []string
	// AuditUsers are the users whose writes the API server audits (see
	// Options.AuditUsers).
	AuditUsers []string
	// Schemes add the types the suite's client knows, beside client-go's.
	Schemes []func(*runtime.Scheme) error
	// Binaries maps main packages (e.g. "./cmd/host") to where Run stores the
	// path of each built binary.
	Binaries map[string]*string
	// Env and Client, when not nil, receive the control plane and a client
	// for it.
	Env    **Env
	Client *client.Client
}

// Run starts the control plane, builds the binaries, runs the tests and tears
// everything down. It returns the exit code for os.Exit, as in
//
//	func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }
func (s Suite) Run(m *testing.M) int {
	// envtest and the client log through controller-runtime: errors go to
	// stderr, and controller-runtime does not print its "SetLogger was never
	// called" warning with a stack trace in the middle of the tests' output.
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	env, err := StartWith(Options{CRDDirs: s.CRDDirs, FeatureGates: s.FeatureGates, AuditUsers: s.AuditUsers})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	defer CleanBuilds()

	scheme := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme}, s.Schemes...) {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if s.Env != nil {
		*s.Env = env
	}
	if s.Client != nil {
		*s.Client = c
	}
	for pkg, dst := range s.Binaries {
		if *dst, err = Build(pkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}
