// Package packaging tests what a release publishes as its users receive it.
// It runs `make release` once, for this machine's platform only, into a
// temporary directory, and checks each artefact: the archive, SHA256SUMS, the
// SBOM and the host image tarball; the platform wheel (whose polyop is the
// binary) and the pure one (whose polyop says how to get it); the npm
// packages, installed from a registry on loopback; the SDKs' wheel and
// tarball, each running a small sidecar from a project outside the
// repository. It checks that every SDK's version is the project's, the
// VERSION file at the repository root. TestInstallWithoutGo follows each
// language's quick start from those packages, Python and TypeScript with no
// go on the PATH, to a Ready sample under polyop run, whose control plane it
// downloads from an envtest release index on loopback. The Go SDK's own
// module test (sdk/go/module_test.go) builds a program of another module
// against it.
//
// The Python virtualenvs install their dependencies with --no-index from the
// wheels `make python-wheelhouse` downloaded once (at the pins of
// sdk/python/requirements-dev.txt); npm installs what is not polyop's from
// its registry, through a cache of the test's own.
package packaging
