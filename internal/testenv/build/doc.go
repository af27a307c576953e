// Package build compiles what polyop's tests run, once per test binary: a
// Go main package of the module (Go, cleaned up by Clean) and a TypeScript
// project with the repository's pinned tsc (TypeScript). RepoRoot is the
// repository they are built from.
package build
