package address

import (
	"path/filepath"
	"testing"

	"github.com/polyop/polyop/internal/testenv"
)

func TestAbsoluteResolvesRelativeUnixPathsAgainstTheWorkingDirectory(t *testing.T) {
	dir := testenv.WorkingDir(t)
	for name, tc := range map[string]struct{ address, want string }{
		"a relative socket is joined to the working directory": {"unix:run/cluster.sock", "unix://" + filepath.Join(dir, "run/cluster.sock")},
		"a parent-relative socket is cleaned":                  {"unix:../cluster.sock", "unix://" + filepath.Join(filepath.Dir(dir), "cluster.sock")},
		"an absolute socket is unchanged":                      {"unix:///var/run/polyop/cluster.sock", "unix:///var/run/polyop/cluster.sock"},
		"unix: with an absolute path gets the canonical form":  {"unix:/var/run/polyop/cluster.sock", "unix:///var/run/polyop/cluster.sock"},
		"a TCP address is unchanged":                           {"tcp://127.0.0.1:9000", "tcp://127.0.0.1:9000"},
		"a bare host:port is unchanged":                        {"localhost:9000", "localhost:9000"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Absolute(tc.address)
			if err != nil || got != tc.want {
				t.Errorf("Absolute(%q) = %q, %v; want %q", tc.address, got, err, tc.want)
			}
		})
	}
	if _, err := Absolute("unix:"); err == nil {
		t.Error("Absolute(\"unix:\") succeeded, want an error")
	}
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:9000": true,
		"127.3.4.5:9000": true,
		"[::1]:9000":     true,
		"localhost:9000": true,
		"0.0.0.0:9000":   false,
		"[::]:9000":      false,
		":9000":          false,
		"10.0.0.7:9000":  false,
		"example.com:80": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
