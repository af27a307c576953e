package testenv

import (
	"github.com/polyop/polyop/internal/testenv/build"
	"github.com/polyop/polyop/internal/testenv/controlplane"
	"github.com/polyop/polyop/internal/testenv/process"
)

// The everyday names of the packages under testenv, so that a test imports
// one package for the common case.

// Env is a running control plane (controlplane.Env).
type Env = controlplane.Env

// Options configure the control plane StartWith starts
// (controlplane.Options).
type Options = controlplane.Options

// Lazy is a control plane shared by a package's tests (controlplane.Lazy).
type Lazy = controlplane.Lazy

// Process is a running child process (process.Process).
type Process = process.Process

// ProcessOptions are the optional settings of StartProcessWith
// (process.Options).
type ProcessOptions = process.Options

// ErrNoNode is returned by BuildTypeScript without node or node_modules.
var ErrNoNode = build.ErrNoNode

// Start starts a control plane with the CRDs in crdDirs (controlplane.Start).
func Start(crdDirs ...string) (*Env, error) { return controlplane.Start(crdDirs...) }

// StartWith starts a control plane as opts say (controlplane.StartWith).
func StartWith(opts Options) (*Env, error) { return controlplane.StartWith(opts) }

// AssetsDir finds the control plane's binaries (controlplane.AssetsDir).
func AssetsDir() (string, error) { return controlplane.AssetsDir() }

// StartProcess starts bin with args, its output logged to log
// (process.Start).
func StartProcess(log process.Logger, name, bin string, args ...string) (*Process, error) {
	return process.Start(log, name, bin, args...)
}

// StartProcessWith starts bin with args and opts (process.StartWith).
func StartProcessWith(name, bin string, args []string, opts ProcessOptions) (*Process, error) {
	return process.StartWith(name, bin, args, opts)
}

// Tail returns the last n lines of s (process.Tail).
func Tail(s string, n int) string { return process.Tail(s, n) }

// RepoRoot is the root of the polyop repository (build.RepoRoot).
func RepoRoot() string { return build.RepoRoot() }

// Build compiles a main package of the module once (build.Go).
func Build(pkg string) (string, error) { return build.Go(pkg) }

// CleanBuilds removes the binaries Build made (build.Clean).
func CleanBuilds() { build.Clean() }

// BuildTypeScript compiles a TypeScript project once (build.TypeScript).
func BuildTypeScript(dir string) error { return build.TypeScript(dir) }
