package sidecar

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/polyop/polyop/sdk/go/address"
)

// DefaultAddress is where a sidecar serves unless told otherwise, and where
// the host looks for it: a unix socket in the volume both containers of the
// pod mount at /var/run/polyop.
const DefaultAddress = address.Default

// SocketMode is the mode of the unix socket Listen creates: read and write for
// its owner and group, nothing for others.
const SocketMode fs.FileMode = 0o660

// Listen opens a listener on a sidecar address, in the form the host's
// --sidecar-address flag takes:
//
//	unix:///var/run/polyop/sidecar.sock   a unix socket at an absolute path
//	unix:sidecar.sock                     a unix socket at a path relative to the working directory
//	tcp://127.0.0.1:9443                  a TCP address
//	127.0.0.1:9443                        a TCP address
//
// A relative socket path is made absolute against the working directory. For
// a unix socket, Listen creates the socket's directory and removes a stale
// socket left by a process that is gone. It refuses to remove anything else:
// a file that is not a socket, or a socket another process still serves on.
// The socket is made readable and writable by its owner and group only
// (0660), as the host makes its own: the host's container needs the same
// user, or a group the pod's fsGroup gives both containers.
func Listen(address string) (net.Listener, error) {
	network, addr, err := parseAddress(address)
	if err != nil {
		return nil, err
	}
	if network == "unix" {
		if err := prepareSocket(addr); err != nil {
			return nil, fmt.Errorf("sidecar: listening on %s: %w", address, err)
		}
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("sidecar: listening on %s: %w", address, err)
	}
	if network == "unix" {
		if err := os.Chmod(addr, SocketMode); err != nil {
			_ = lis.Close()
			return nil, fmt.Errorf("sidecar: listening on %s: %w", address, err)
		}
	}
	return lis, nil
}

// parseAddress splits a sidecar address into a network and an address for
// net.Listen.
func parseAddress(addr string) (network, path string, err error) {
	if network, path, err = address.Parse(addr); err != nil {
		return "", "", fmt.Errorf("sidecar: %w", err)
	}
	return network, path, nil
}

// prepareSocket creates the socket's directory and removes a stale socket.
func prepareSocket(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the socket's directory: %w", err)
	}
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if info.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket; refusing to remove it", path)
	}
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = conn.Close()
		return fmt.Errorf("another process is serving on %s", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the stale socket: %w", err)
	}
	return nil
}
