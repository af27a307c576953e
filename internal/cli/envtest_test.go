package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/controlplane"
)

func TestEnvtestCommand(t *testing.T) {
	t.Parallel()
	full := t.TempDir()
	for _, name := range controlplane.Binaries {
		if err := os.WriteFile(filepath.Join(full, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	source := filepath.Join("..", "..", "hack", "tools", "envtest")
	cases := map[string]struct {
		args    []string
		wantErr string
		wantOut string
	}{
		"if the version asked for is not the tools module's, then it says which to change": {
			args:    []string{"--dir", t.TempDir(), "--source", source, "--version", "0.0.1"},
			wantErr: "asked for Kubernetes 0.0.1, but the tools module builds " + controlplane.Version(),
		},
		"if the folder holds every binary, then nothing is built": {
			args:    []string{"--dir", full, "--source", source, "--version", controlplane.Version()},
			wantOut: "holds what was asked for already",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := NewEnvtestCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			err := cmd.ExecuteContext(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("error = %v, output %q, want %q", err, out.String(), tc.wantOut)
			}
		})
	}
}
