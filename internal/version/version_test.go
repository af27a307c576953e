package version_test

import (
	"os"
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/version"
)

func TestVersionIsTheVERSIONFile(t *testing.T) {
	raw, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(raw)); version.Version != want {
		t.Errorf("version.Version is %q, the VERSION file %q: run go generate ./internal/version (make generate)", version.Version, want)
	}
}
