// Package version is polyop's version, one for everything a release holds:
// the polyop command, the host inside it, the host image tag config/ pins and
// the three SDKs. The VERSION file at the repository's root is its source:
// go generate writes it into zz_generated.version.go, so that a binary built
// by `go install github.com/polyop/polyop/cmd/polyop@v<version>`, which can
// pass no -ldflags, knows its version too. `make check-generated` keeps the
// two in step, and the Python and TypeScript SDKs' versions are checked
// against the same file (test/packaging).
package version

//go:generate go run ./gen -version ../../VERSION -out zz_generated.version.go
