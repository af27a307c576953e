package sidecar

import (
	"fmt"

	"github.com/polyop/polyop/internal/address"
)

// Target turns a sidecar address into a gRPC dial target.
//
// Accepted forms are "unix:///absolute/path.sock", "unix:relative/path.sock",
// "tcp://host:port" and a bare "host:port". TCP targets bypass name resolution
// (gRPC's passthrough resolver), so a sidecar on localhost is dialled at once.
func Target(addr string) (string, error) {
	t, err := address.Target(addr, "passthrough")
	if err != nil {
		return "", fmt.Errorf("sidecar %w", err)
	}
	return t, nil
}
