// Package address parses the endpoint addresses polyop uses everywhere — the
// host's --sidecar-address and --cluster-address, a sidecar's serving
// address, the probe's target: "unix:///absolute/path.sock",
// "unix:relative/path.sock", "tcp://host:port" or a bare "host:port".
package address

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
)

// Parse splits an address into a network ("unix" or "tcp") and an address,
// as net.Listen and net.Dial take them.
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
		return "unix", path, nil
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
	case filepath.IsAbs(addr):
		return "unix://" + addr, nil
	default:
		return "unix:" + addr, nil
	}
}
