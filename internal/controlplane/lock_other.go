//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd || windows)

package controlplane

import "os"

// tryLockFile does not lock on this OS: polyops running at once may both
// download the control plane.
func tryLockFile(*os.File) (bool, error) { return true, nil }

// lockFile does not lock on this OS.
func lockFile(*os.File) error { return nil }
