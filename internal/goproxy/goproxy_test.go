package goproxy_test

import (
	"archive/zip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/dirhash"

	"github.com/polyop/polyop/internal/goproxy"
)

// TestWriteServesTheWorkingTreeAsTheProxyWould writes a module and a nested
// one of a git working tree and checks the folder as GOPROXY=file:// reads
// it: list, info, mod and a zip of the module's own files (tracked and
// untracked, not ignored, not the nested module's), with the go.sum hashes
// of that zip and go.mod.
func TestWriteServesTheWorkingTreeAsTheProxyWould(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH")
	}
	root := t.TempDir()
	files := map[string]string{
		"go.mod":        "module example.com/m\n\ngo 1.26\n",
		"m.go":          "package m\n",
		".gitignore":    "ignored.txt\n",
		"ignored.txt":   "not in the module\n",
		"untracked.go":  "package m\n",
		"sub/go.mod":    "module example.com/m/sub\n\ngo 1.26\n",
		"sub/sub.go":    "package sub\n",
		"docs/guide.md": "# guide\n",
	}
	for name, content := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "go.mod", "m.go", ".gitignore", "sub", "docs"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}

	out := t.TempDir()
	stamp := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	written, err := goproxy.Write(out, root, "v1.2.3", stamp, []goproxy.Module{{Dir: "."}, {Dir: "sub"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 2 || written[0].Path != "example.com/m" || written[1].Path != "example.com/m/sub" {
		t.Fatalf("Write wrote %+v, want example.com/m and example.com/m/sub", written)
	}

	vdir := filepath.Join(out, "example.com", "m", "@v")
	if list := read(t, filepath.Join(vdir, "list")); list != "v1.2.3\n" {
		t.Errorf("list = %q, want v1.2.3", list)
	}
	var info struct{ Version, Time string }
	if err := json.Unmarshal([]byte(read(t, filepath.Join(vdir, "v1.2.3.info"))), &info); err != nil {
		t.Fatal(err)
	}
	if info.Version != "v1.2.3" || info.Time != "2026-12-01T10:00:00Z" {
		t.Errorf("info = %+v, want v1.2.3 at the time given", info)
	}
	if mod := read(t, filepath.Join(vdir, "v1.2.3.mod")); mod != files["go.mod"] {
		t.Errorf("mod = %q, want the module's go.mod", mod)
	}
	zipPath := filepath.Join(vdir, "v1.2.3.zip")
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = zr.Close() }()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	want := []string{"example.com/m@v1.2.3/.gitignore", "example.com/m@v1.2.3/docs/guide.md", "example.com/m@v1.2.3/go.mod",
		"example.com/m@v1.2.3/m.go", "example.com/m@v1.2.3/untracked.go"}
	if !slices.Equal(names, want) {
		t.Errorf("the zip holds %v, want %v (no ignored file, nothing of the nested module)", names, want)
	}
	if sum, err := dirhash.HashZip(zipPath, dirhash.Hash1); err != nil || sum != written[0].Sum {
		t.Errorf("the zip's hash is %s (%v), Write said %s", sum, err, written[0].Sum)
	}
	if lines := written[0].GoSumLines(); !strings.HasPrefix(lines, "example.com/m v1.2.3 h1:") || !strings.Contains(lines, "\nexample.com/m v1.2.3/go.mod h1:") {
		t.Errorf("GoSumLines = %q", lines)
	}

	// Writing the same tree again gives the same module: the list holds the
	// version once and the hash is the same.
	again, err := goproxy.Write(out, root, "v1.2.3", stamp, []goproxy.Module{{Dir: "."}})
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Sum != written[0].Sum {
		t.Errorf("writing the same tree twice gave %s, then %s", written[0].Sum, again[0].Sum)
	}
	if list := read(t, filepath.Join(vdir, "list")); list != "v1.2.3\n" {
		t.Errorf("list after a second write = %q, want v1.2.3 once", list)
	}
}

func TestWriteRefusesAFolderWithoutAModule(t *testing.T) {
	root := t.TempDir()
	cmd := exec.Command("git", "init", "-q")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if _, err := goproxy.Write(t.TempDir(), root, "v1.0.0", time.Now(), []goproxy.Module{{Dir: "."}}); err == nil || !strings.Contains(err.Error(), "go.mod") {
		t.Errorf("Write of a folder without go.mod: error %v, want one naming go.mod", err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
