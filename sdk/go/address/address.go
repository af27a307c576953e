// Package address parses the endpoint addresses polyop uses everywhere — the
// host's --sidecar-address and --cluster-address, a sidecar's serving
// address (sidecar.Serve), the Cluster service's (client.New), the probe's
// target: "unix:///absolute/path.sock", "unix:relative/path.sock",
// "tcp://host:port" or a bare "host:port". The host parses them with this
// package too, so both sides read an address the same way.
//
// A relative unix path is relative to the working directory of the process
// that reads it, and is resolved to an absolute path at once: an address
// handed to another process (the host announcing its Cluster service to its
// sidecar) then names the same socket whatever that process's working
// directory.
package address

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
)

// Default is the sidecar's default address, on both sides: a unix socket in
// the volume both containers of the pod mount at /var/run/polyop. The host
// dials it unless --sidecar-address says otherwise, the SDKs serve on it
// (sidecar.DefaultAddress), and the probe checks it.
const Default = "unix:///var/run/polyop/sidecar.sock"

// Parse splits an address into a network ("unix" or "tcp") and an address,
// as net.Listen and net.Dial take them. A unix socket's path is made absolute,
// relative to the working directory.
func Parse(address string) (network, addr string, err error) {
	switch {
	case address == "":
		return "", "", errors.New("the address is empty")
	case strings.HasPrefix(address, "unix://"):
		path := strings.TrimPrefix(address, "unix://")
		if !filepath.IsAbs(path) {
			return "", "", fmt.Errorf("address %q: unix:// takes an absolute path (unix:///path/to.sock); use unix:%s for a relative one", address, path)
		}
		return "unix", path, nil
	case strings.HasPrefix(address, "unix:"):
		path := strings.TrimPrefix(address, "unix:")
		if path == "" {
			return "", "", fmt.Errorf("address %q has no socket path", address)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", "", fmt.Errorf("address %q: resolving the socket's path: %w", address, err)
		}
		return "unix", abs, nil
	case strings.HasPrefix(address, "tcp://"):
		address = strings.TrimPrefix(address, "tcp://")
	case strings.Contains(address, "://"):
		return "", "", fmt.Errorf("address %q: unsupported scheme: the scheme must be unix or tcp (unix:///path, tcp://host:port)", address)
	}
	// An empty host (":9443") listens on every interface.
	if _, port, err := net.SplitHostPort(address); err != nil || port == "" {
		return "", "", fmt.Errorf("address %q is neither unix:PATH nor [tcp://]HOST:PORT", address)
	}
	return "tcp", address, nil
}

// Target turns an address into a gRPC dial target. TCP addresses go through
// the named gRPC resolver ("passthrough" dials at once; "dns" resolves).
func Target(address, tcpResolver string) (string, error) {
	network, addr, err := Parse(address)
	switch {
	case err != nil:
		return "", err
	case network == "tcp":
		return tcpResolver + ":///" + addr, nil
	default:
		return "unix://" + addr, nil
	}
}
