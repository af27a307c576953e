package sidecar

import (
	"os"
	"testing"
)

func TestTarget(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		address, want string
		wantErr       bool
	}{
		"an absolute unix socket is dialled as is":               {address: "unix:///var/run/polyop/sidecar.sock", want: "unix:///var/run/polyop/sidecar.sock"},
		"a relative unix socket is dialled at its absolute path": {address: "unix:sidecar.sock", want: "unix://" + workingDir(t) + "/sidecar.sock"},
		"tcp:// bypasses name resolution":                        {address: "tcp://127.0.0.1:9000", want: "passthrough:///127.0.0.1:9000"},
		"a bare host:port is TCP":                                {address: "localhost:9000", want: "passthrough:///localhost:9000"},
		"an IPv6 host:port is TCP":                               {address: "[::1]:9000", want: "passthrough:///[::1]:9000"},
		"unix:// with a relative path is an error":               {address: "unix://sidecar.sock", wantErr: true},
		"an empty address is an error":                           {address: "", wantErr: true},
		"an unknown scheme is an error":                          {address: "http://localhost:9000", wantErr: true},
		"a host without a port is an error":                      {address: "localhost", wantErr: true},
		"unix: without a path is an error":                       {address: "unix:", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Target(tc.address)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Target(%q) error = %v, wantErr %v", tc.address, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("Target(%q) = %q, want %q", tc.address, got, tc.want)
			}
		})
	}
}

// workingDir is the test's working directory, against which relative unix
// socket paths are resolved.
func workingDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
