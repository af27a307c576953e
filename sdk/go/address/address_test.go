package address

import (
	"testing"

	"github.com/polyop/polyop/sdk/go/internal/sdktest"
)

func TestTarget(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		address, want string
		wantErr       bool
	}{
		"an absolute unix socket keeps its form":   {address: "unix:///run/s.sock", want: "unix:///run/s.sock"},
		"a relative unix socket is made absolute":  {address: "unix:s.sock", want: "unix://" + sdktest.WorkingDir(t) + "/s.sock"},
		"tcp:// goes through the named resolver":   {address: "tcp://127.0.0.1:9000", want: "passthrough:///127.0.0.1:9000"},
		"a bare host:port is TCP":                  {address: "localhost:9000", want: "passthrough:///localhost:9000"},
		"an IPv6 host:port is TCP":                 {address: "[::1]:9000", want: "passthrough:///[::1]:9000"},
		"unix:// with a relative path is an error": {address: "unix://s.sock", wantErr: true},
		"an unknown scheme is an error":            {address: "http://h:1", wantErr: true},
		"a host without a port is an error":        {address: "localhost", wantErr: true},
		"an empty address is an error":             {address: "", wantErr: true},
		"unix: without a path is an error":         {address: "unix:", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Target(tc.address, "passthrough")
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("Target(%q) = %q, %v; want %q, error %v", tc.address, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
