// Package address parses the endpoint addresses polyop uses everywhere — the
// host's --sidecar-address and --cluster-address, a sidecar's serving
// address, the probe's target — with the Go SDK's parser
// (github.com/polyop/polyop/sdk/go/address), so that the host and the SDK
// read an address the same way, and adds what only the host needs. The
// sidecar's default address is the SDK's too: address.Default there.
package address

import (
	"net"

	sdkaddress "github.com/polyop/polyop/sdk/go/address"
)

// Parse splits an address into a network ("unix" or "tcp") and an address,
// as net.Listen and net.Dial take them. See the SDK's address.Parse.
func Parse(address string) (network, addr string, err error) {
	return sdkaddress.Parse(address)
}

// Target turns an address into a gRPC dial target. See the SDK's
// address.Target.
func Target(address, tcpResolver string) (string, error) {
	return sdkaddress.Target(address, tcpResolver)
}

// Absolute returns address with a relative unix socket path made absolute
// ("unix:s.sock" in /run becomes "unix:///run/s.sock"); other addresses are
// returned unchanged. An address announced to another process must be
// absolute, since that process may run in another directory.
func Absolute(address string) (string, error) {
	network, addr, err := Parse(address)
	if err != nil {
		return "", err
	}
	if network == "unix" {
		return "unix://" + addr, nil
	}
	return address, nil
}

// IsLoopback reports whether a TCP address (as Parse returns it) listens on
// or dials a loopback interface only: "localhost", or an IP address in
// 127.0.0.0/8 or ::1. An empty host (":9443") is every interface, so not
// loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
