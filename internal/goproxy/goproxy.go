// Package goproxy writes a Go module proxy folder, which GOPROXY=file://DIR
// serves, holding modules of a git working tree at a version: what the
// module proxy serves once a release pushes its tags (v<version> for
// github.com/polyop/polyop, sdk/go/v<version> for its Go SDK). The tests
// install polyop through it exactly as a user's `go install …@v<version>`
// does, and the Makefile resolves the host module's requirement on the SDK
// through it (check-tidy).
//
// A module's files are the ones git knows of in the working tree (tracked,
// or untracked and not ignored), as the tree holds them now: a clean clone
// gives what the tag will. The module zip is made by golang.org/x/mod/zip,
// the go command's own code, so it leaves out what the proxy would (nested
// modules, vendor folders) and refuses what it would refuse.
package goproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// Module is a module of the working tree.
type Module struct {
	// Dir is the module's folder, relative to the working tree's root,
	// in slash form: "." for the root.
	Dir string
}

// Written is a module version a proxy folder holds.
type Written struct {
	module.Version
	// Sum and GoModSum are its go.sum lines' hashes (h1:…): of its zip and
	// of its go.mod.
	Sum, GoModSum string
}

// GoSumLines are the two go.sum lines of w.
func (w Written) GoSumLines() string {
	return fmt.Sprintf("%s %s %s\n%s %s/go.mod %s\n", w.Path, w.Version.Version, w.Sum, w.Path, w.Version.Version, w.GoModSum)
}

// Write writes, into the proxy folder out, each of modules of the git
// working tree at root at version (v1.2.3), stamped with time, and returns
// what it wrote. A module version already in out is replaced, so that
// writing the same tree twice gives the same folder.
func Write(out, root, version string, t time.Time, modules []Module) ([]Written, error) {
	files, err := treeFiles(root)
	if err != nil {
		return nil, err
	}
	var written []Written
	for _, m := range modules {
		w, err := writeModule(out, root, version, t, m.Dir, files)
		if err != nil {
			return nil, fmt.Errorf("module in %s: %w", m.Dir, err)
		}
		written = append(written, w)
	}
	return written, nil
}

func writeModule(out, root, version string, t time.Time, dir string, tree []string) (Written, error) {
	gomod, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dir), "go.mod"))
	if err != nil {
		return Written{}, err
	}
	modPath := modfile.ModulePath(gomod)
	if modPath == "" {
		return Written{}, fmt.Errorf("%s/go.mod names no module", dir)
	}
	mv := module.Version{Path: modPath, Version: version}
	if err := module.Check(mv.Path, mv.Version); err != nil {
		return Written{}, err
	}
	escPath, err := module.EscapePath(mv.Path)
	if err != nil {
		return Written{}, err
	}
	escVersion, err := module.EscapeVersion(mv.Version)
	if err != nil {
		return Written{}, err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return Written{}, err
	}

	var files []modzip.File
	prefix := ""
	if dir != "." {
		prefix = strings.TrimSuffix(dir, "/") + "/"
	}
	for _, p := range tree {
		if rel, ok := strings.CutPrefix(p, prefix); ok {
			files = append(files, treeFile{rel: rel, abs: filepath.Join(root, filepath.FromSlash(p))})
		}
	}
	zipPath := filepath.Join(vdir, escVersion+".zip")
	if err := writeFile(zipPath, func(w io.Writer) error { return modzip.Create(w, mv, files) }); err != nil {
		return Written{}, fmt.Errorf("zipping %s: %w", mv, err)
	}
	if err := os.WriteFile(filepath.Join(vdir, escVersion+".mod"), gomod, 0o644); err != nil {
		return Written{}, err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    string
	}{mv.Version, t.UTC().Format(time.RFC3339)})
	if err != nil {
		return Written{}, err
	}
	if err := os.WriteFile(filepath.Join(vdir, escVersion+".info"), info, 0o644); err != nil {
		return Written{}, err
	}
	if err := addToList(filepath.Join(vdir, "list"), mv.Version); err != nil {
		return Written{}, err
	}

	sum, err := dirhash.HashZip(zipPath, dirhash.Hash1)
	if err != nil {
		return Written{}, err
	}
	modSum, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gomod)), nil
	})
	if err != nil {
		return Written{}, err
	}
	return Written{Version: mv, Sum: sum, GoModSum: modSum}, nil
}

// treeFiles lists the files git knows of in the working tree at root:
// tracked ones that still exist, and untracked ones that are not ignored,
// slash-separated and relative to root.
func treeFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the files of the git working tree at %s: %w: %s", root, err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	seen := map[string]bool{}
	for _, p := range strings.Split(string(out), "\x00") {
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		// A tracked file deleted in the working tree is gone from the
		// module too; a symlink or folder (a submodule) is no module file.
		info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		files = append(files, path.Clean(p))
	}
	return files, nil
}

// treeFile is a file of the working tree, as a module zip file.
type treeFile struct{ rel, abs string }

func (f treeFile) Path() string                 { return f.rel }
func (f treeFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.abs) }
func (f treeFile) Open() (io.ReadCloser, error) { return os.Open(f.abs) }

// addToList adds version to a proxy's list file, once.
func addToList(list, version string) error {
	data, err := os.ReadFile(list)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, v := range strings.Fields(string(data)) {
		if v == version {
			return nil
		}
	}
	return os.WriteFile(list, append(data, version+"\n"...), 0o644)
}

// writeFile writes a file through write into a temporary file beside it,
// renamed into place once complete.
func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
