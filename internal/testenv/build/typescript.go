package build

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
)

// ErrNoNode is returned by TypeScript when node, or the packages `make
// node_modules` installs, are missing.
var ErrNoNode = errors.New("no node, or no node_modules in the repository (run make node_modules)")

var (
	tsMu    sync.Mutex
	tsBuilt = map[string]error{}
)

// TypeScript compiles the TypeScript project in dir (relative to the
// repository root, e.g. "examples/typescript/configmapsync") and the projects
// it references, once per process, with the repository's pinned tsc (tsc -b:
// a project that is up to date is not compiled again). Test binaries of
// several packages may build at the same time, so the build holds a lock
// file in node_modules.
func TypeScript(dir string) error {
	tsMu.Lock()
	defer tsMu.Unlock()
	if err, ok := tsBuilt[dir]; ok {
		return err
	}
	err := typeScript(dir)
	tsBuilt[dir] = err
	return err
}

func typeScript(dir string) error {
	root := RepoRoot()
	tsc := filepath.Join(root, "node_modules", ".bin", "tsc")
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("%w: %w", ErrNoNode, err)
	}
	if _, err := os.Stat(tsc); err != nil {
		return fmt.Errorf("%w: %w", ErrNoNode, err)
	}
	lock, err := os.OpenFile(filepath.Join(root, "node_modules", ".polyop-tsc.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking the TypeScript build: %w", err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	cmd := exec.Command(tsc, "-b", dir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tsc -b %s: %w\n%s", dir, err, out)
	}
	return nil
}
