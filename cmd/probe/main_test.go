package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.CleanBuilds()
	os.Exit(code)
}

func TestProbe(t *testing.T) {
	t.Parallel()
	addr, hs := fakesidecar.Serve(t, nil)
	hs.SetServingStatus("polyop.v1alpha1.SidecarService", healthpb.HealthCheckResponse_NOT_SERVING)

	// The probe's default timeout (1s) is short for a busy machine: the
	// cases that expect an answer allow a longer one.
	tests := map[string]struct {
		args    []string
		wantErr string // empty: success
	}{
		"if the server reports SERVING, then the probe passes": {
			args: []string{"--address", addr, "--timeout", "1m"},
		},
		"if the named service reports NOT_SERVING, then the probe fails saying so": {
			args:    []string{"--address", addr, "--service", "polyop.v1alpha1.SidecarService", "--timeout", "1m"},
			wantErr: "NOT_SERVING",
		},
		"if the named service is unknown, then the probe fails": {
			args:    []string{"--address", addr, "--service", "nope", "--timeout", "1m"},
			wantErr: "NotFound",
		},
		"if nothing listens at the address, then the probe fails within its timeout": {
			args:    []string{"--address", addr + ".missing", "--timeout", "500ms"},
			wantErr: "health check of " + addr + ".missing",
		},
		"if the address has an unknown scheme, then the probe fails without dialling": {
			args:    []string{"--address", "http://localhost:80"},
			wantErr: "unsupported scheme",
		},
		"if there are stray arguments, then the probe fails": {
			args:    []string{"--address", addr, "extra"},
			wantErr: "unexpected arguments",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			err := run(tc.args, &bytes.Buffer{})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("run(%q) = %v, want success", tc.args, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.wantErr)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("run took %s", d)
			}
		})
	}
}

func TestDialTargetMatchesTheHost(t *testing.T) {
	t.Parallel()
	for _, address := range []string{
		"unix:///var/run/polyop/sidecar.sock",
		"unix:rel/sidecar.sock",
		"unix://rel/sidecar.sock",
		"unix:",
		"tcp://127.0.0.1:9443",
		"tcp://127.0.0.1",
		"localhost:50051",
		"[::1]:50051",
		"http://x:1",
		"",
		"noport",
	} {
		want, wantErr := sidecar.Target(address)
		got, err := dialTarget(address)
		if got != want || (err == nil) != (wantErr == nil) {
			t.Errorf("dialTarget(%q) = %q, %v; the host's sidecar.Target gives %q, %v", address, got, err, want, wantErr)
		}
	}
}

func TestCopyToWritesAnExecutableCopy(t *testing.T) {
	t.Parallel()
	dst := filepath.Join(t.TempDir(), "bin", "probe")
	if err := run([]string{"--copy-to", dst}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.Stat(self)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if got.Size() != want.Size() || got.Mode().Perm() != 0o555 {
		t.Errorf("copy: size %d mode %v, want size %d mode -r-xr-xr-x", got.Size(), got.Mode().Perm(), want.Size())
	}
	entries, err := os.ReadDir(filepath.Dir(dst))
	if err != nil || len(entries) != 1 {
		t.Errorf("the copy's directory holds %v (%v), want the copy alone", entries, err)
	}
}

// TestBinaryExitCodes runs the built binary as the kubelet does: exit code 0
// passes, anything else fails, and the reason is on its output.
func TestBinaryExitCodes(t *testing.T) {
	t.Parallel()
	bin, err := testenv.Build("./cmd/probe")
	if err != nil {
		t.Fatal(err)
	}
	addr, hs := fakesidecar.Serve(t, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "--address", addr, "--timeout", "1m").CombinedOutput(); err != nil {
		t.Fatalf("probe of a serving sidecar: %v\n%s", err, out)
	}
	hs.Shutdown() // every service NOT_SERVING, as a sidecar that is stopping
	out, err := exec.CommandContext(ctx, bin, "--address", addr, "--timeout", "1m").CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("probe of a stopping sidecar: %v, want exit code 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "NOT_SERVING") {
		t.Errorf("output %q does not say why", out)
	}
}
