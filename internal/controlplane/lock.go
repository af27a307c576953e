package controlplane

import (
	"context"
	"fmt"
	"os"
)

// lock takes an exclusive lock on the file at path, creating it when it does
// not exist, and returns the function that releases it. While another process
// (or another open file in this one) holds the lock, it calls waiting once,
// then waits until the lock is free or ctx is done.
func lock(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	// Closing the file releases the lock.
	unlock = func() { _ = f.Close() }
	locked, err := tryLockFile(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if locked {
		return unlock, nil
	}
	waiting()
	got := make(chan error)
	go func() {
		err := lockFile(f)
		select {
		case got <- err:
		case <-ctx.Done():
			// Nobody waits for the lock any more: release it.
			_ = f.Close()
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		return unlock, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
