package build

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// RepoRoot is the root of the polyop repository.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

var (
	buildMu  sync.Mutex
	built    = map[string]string{}
	buildDir string
)

// Go compiles the main package pkg (relative to the repository root, e.g.
// "./cmd/host") once per process and returns the binary's path.
func Go(pkg string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if path, ok := built[pkg]; ok {
		return path, nil
	}
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "polyop-bin-")
		if err != nil {
			return "", err
		}
		buildDir = dir
	}
	out := filepath.Join(buildDir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "-"))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
	}
	built[pkg] = out
	return out, nil
}

// Clean removes the binaries Go made.
func Clean() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}
