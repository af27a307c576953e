//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package controlplane

import (
	"errors"
	"os"
	"syscall"
)

// tryLockFile takes an exclusive flock on f, unless another open file holds
// one: then it reports false.
func tryLockFile(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// lockFile takes an exclusive flock on f, waiting while another open file
// holds one.
func lockFile(f *os.File) error {
	for {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
