package sidecar

import (
	"fmt"
	"path/filepath"
	"strings"
)

// DefaultAddress is where the host looks for its sidecar unless told otherwise:
// a unix socket in the volume both containers of the pod mount at
// /var/run/polyop.
const DefaultAddress = "unix:///var/run/polyop/sidecar.sock"

// Target turns a sidecar address into a gRPC dial target.
//
// Accepted forms are "unix:///absolute/path.sock", "unix:relative/path.sock",
// "tcp://host:port" and a bare "host:port". TCP targets bypass name resolution
// (gRPC's passthrough resolver), so a sidecar on localhost is dialled at once.
func Target(address string) (string, error) {
	switch {
	case address == "":
		return "", fmt.Errorf("sidecar address is empty")
	case strings.HasPrefix(address, "unix://"):
		path := strings.TrimPrefix(address, "unix://")
		if !filepath.IsAbs(path) {
			return "", fmt.Errorf("sidecar address %q: unix:// needs an absolute path (use unix:relative/path for a relative one)", address)
		}
		return "unix://" + path, nil
	case strings.HasPrefix(address, "unix:"):
		path := strings.TrimPrefix(address, "unix:")
		if path == "" {
			return "", fmt.Errorf("sidecar address %q has no socket path", address)
		}
		return "unix:" + path, nil
	case strings.HasPrefix(address, "tcp://"):
		return hostPort(address, strings.TrimPrefix(address, "tcp://"))
	case strings.Contains(address, "://"):
		return "", fmt.Errorf("sidecar address %q: unsupported scheme (use unix:///path or tcp://host:port)", address)
	default:
		return hostPort(address, address)
	}
}

func hostPort(address, hp string) (string, error) {
	i := strings.LastIndex(hp, ":")
	if i <= 0 || i == len(hp)-1 {
		return "", fmt.Errorf("sidecar address %q: want host:port", address)
	}
	return "passthrough:///" + hp, nil
}
