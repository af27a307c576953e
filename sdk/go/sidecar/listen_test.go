package sidecar

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyop/polyop/sdk/go/internal/sdktest"
)

func TestParseAddress(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		address     string
		wantNetwork string
		wantAddr    string
		wantErr     string
	}{
		"if the address is unix with an absolute path, then it is that socket": {
			address: "unix:///var/run/polyop/sidecar.sock", wantNetwork: "unix", wantAddr: "/var/run/polyop/sidecar.sock",
		},
		"if the address is unix with a relative path, then it is that socket, at its absolute path": {
			address: "unix:run/sidecar.sock", wantNetwork: "unix", wantAddr: sdktest.WorkingDir(t) + "/run/sidecar.sock",
		},
		"if the address is unix:// with a relative path, then it is refused": {
			address: "unix://run/sidecar.sock", wantErr: "absolute path",
		},
		"if the address is unix without a path, then it is refused": {
			address: "unix:", wantErr: "no socket path",
		},
		"if the address is tcp://, then it is TCP": {
			address: "tcp://127.0.0.1:9443", wantNetwork: "tcp", wantAddr: "127.0.0.1:9443",
		},
		"if the address is host:port, then it is TCP": {
			address: "localhost:9443", wantNetwork: "tcp", wantAddr: "localhost:9443",
		},
		"if the address is :port, then it is TCP on every interface": {
			address: ":9443", wantNetwork: "tcp", wantAddr: ":9443",
		},
		"if the address has another scheme, then it is refused": {
			address: "http://localhost:80", wantErr: "must be unix or tcp",
		},
		"if the address has no port, then it is refused": {
			address: "localhost", wantErr: "neither unix:PATH nor",
		},
		"if the address is empty, then it is refused": {
			address: "", wantErr: "empty",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			network, addr, err := parseAddress(tc.address)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if network != tc.wantNetwork || addr != tc.wantAddr {
				t.Errorf("got %s %s, want %s %s", network, addr, tc.wantNetwork, tc.wantAddr)
			}
		})
	}
}

// socketPath returns a short socket path: unix socket paths are limited to
// about 100 bytes, and t.TempDir can be longer.
func socketPath(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "polyop")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, name)
}

func TestListenOnAUnixSocket(t *testing.T) {
	t.Parallel()

	t.Run("if the directory is missing, then it is created", func(t *testing.T) {
		t.Parallel()
		path := socketPath(t, "sub/dir/s.sock")
		lis, err := Listen("unix://" + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = lis.Close()
	})
	t.Run("the socket is readable and writable by its owner and group only", func(t *testing.T) {
		t.Parallel()
		path := socketPath(t, "s.sock")
		lis, err := Listen("unix://" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o660 {
			t.Errorf("the socket's mode is %v, want %v", got, fs.FileMode(0o660))
		}
	})
	t.Run("if the address is relative, then the socket is at its absolute path", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Dir(socketPath(t, "s.sock"))
		rel, err := filepath.Rel(sdktest.WorkingDir(t), filepath.Join(dir, "s.sock"))
		if err != nil {
			t.Skipf("the temporary directory has no path relative to the working directory: %v", err)
		}
		lis, err := Listen("unix:" + rel)
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		if got, want := lis.Addr().String(), filepath.Join(dir, "s.sock"); got != want {
			t.Errorf("listening on %s, want %s", got, want)
		}
	})
	t.Run("if a stale socket is left, then it is replaced", func(t *testing.T) {
		t.Parallel()
		path := socketPath(t, "s.sock")
		stale, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		// Leave the socket file behind, as a process that died would.
		stale.(*net.UnixListener).SetUnlinkOnClose(false)
		_ = stale.Close()
		lis, err := Listen("unix:" + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = lis.Close()
	})
	t.Run("if another process serves on the socket, then Listen refuses", func(t *testing.T) {
		t.Parallel()
		path := socketPath(t, "s.sock")
		live, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		if _, err := Listen("unix://" + path); err == nil || !strings.Contains(err.Error(), "another process is serving") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("if the path is a regular file, then Listen refuses to remove it", func(t *testing.T) {
		t.Parallel()
		path := socketPath(t, "s.sock")
		if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Listen("unix://" + path); err == nil || !strings.Contains(err.Error(), "is not a socket") {
			t.Fatalf("error = %v", err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("the file is gone: %v", err)
		}
	})
}
