// Package packaging tests the SDKs as another repository uses them: it builds
// them with `make dist` into a temporary directory, installs the Python wheel
// into a fresh virtualenv and the npm tarball into an empty npm project outside
// the repository, and runs a small sidecar with each. It also checks that every
// SDK's version is the project's, the VERSION file at the repository root.
// The Go SDK's own module test (sdk/go/module_test.go) builds a program of
// another module against it.
//
// The Python virtualenv installs its dependencies with --no-index from the
// wheels `make python-wheelhouse` downloaded once (at the pins of
// sdk/python/requirements-dev.txt); the npm project installs its dependencies
// from npm's cache, else the registry.
package packaging
