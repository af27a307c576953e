package conformance

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/testenv"
)

// quoted is a Go block of docs/migrating.md with the marker that names the
// file it quotes: <!-- quote: path --> on the line before its ```go.
var quoted = regexp.MustCompile("(?s)(<!-- quote: ([^ ]+) -->\n)?```go\n(.*?)```")

// TestTheMigrationGuideQuotesTheConformanceOperator checks that every Go
// snippet of docs/migrating.md names the file of the conformance operator it
// quotes and still appears there character for character, so that the guide
// shows the code TestAReconcilerListsByACustomIndexInASidecarAsInAManager
// runs.
func TestTheMigrationGuideQuotesTheConformanceOperator(t *testing.T) {
	t.Parallel()
	root := testenv.RepoRoot()
	guide, err := os.ReadFile(filepath.Join(root, "docs", "migrating.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := quoted.FindAllStringSubmatch(string(guide), -1)
	if len(blocks) < 5 {
		t.Fatalf("docs/migrating.md has %d Go blocks, want the quotes of the operator's main.go, controller and webhooks", len(blocks))
	}
	for _, b := range blocks {
		path, code := b[2], b[3]
		first, _, _ := strings.Cut(code, "\n")
		if path == "" {
			t.Errorf("the Go block of docs/migrating.md starting %q names no file: put <!-- quote: path --> before it", first)
			continue
		}
		if !strings.HasPrefix(path, "test/conformance/indexsidecar/") {
			t.Errorf("the Go block starting %q quotes %s, not the conformance operator", first, path)
		}
		source, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
		if err != nil {
			t.Errorf("the Go block starting %q: %v", first, err)
			continue
		}
		if !strings.Contains(string(source), code) {
			t.Errorf("docs/migrating.md quotes from %s a block starting %q that is not there any more: quote the file as it is", path, first)
		}
	}
}
