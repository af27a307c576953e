// Package sdktest holds helpers the Go SDK's own tests share.
package sdktest

import (
	"os"
	"testing"
)

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
