package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		args    []string
		check   func(t *testing.T, cfg config)
		wantErr string
	}{
		"if no flag is given, then the defaults apply": {
			check: func(t *testing.T, cfg config) {
				if cfg.address != sidecar.DefaultAddress || cfg.sidecar.Name != "testsidecar" ||
					cfg.controllerName != "maintenancewindow" || cfg.kindOverride != nil || cfg.updateFilters != nil ||
					cfg.sidecar.MaxMessageSize != sidecar.DefaultMaxMessageSize {
					t.Errorf("config = %+v", cfg)
				}
			},
		},
		"if update filters are listed, then they are parsed in order": {
			args: []string{"--update-filters", "generation, annotations,labels,deletion"},
			check: func(t *testing.T, cfg config) {
				want := []sidecar.UpdateFilter{sidecar.GenerationChanged, sidecar.AnnotationsChanged, sidecar.LabelsChanged, sidecar.DeletionChanged}
				if !slices.Equal(cfg.updateFilters, want) {
					t.Errorf("update filters = %v", cfg.updateFilters)
				}
			},
		},
		"if a kind override names a group, then it is used": {
			args: []string{"--kind-override", "examples.polyop.dev/v1/Nonexistent"},
			check: func(t *testing.T, cfg config) {
				if k := cfg.kindOverride; k.GetGroup() != "examples.polyop.dev" || k.GetVersion() != "v1" || k.GetKind() != "Nonexistent" {
					t.Errorf("kind = %v", k)
				}
			},
		},
		"if a kind override has no group, then it is in the core group": {
			args: []string{"--kind-override", "v1/Nonexistent"},
			check: func(t *testing.T, cfg config) {
				if k := cfg.kindOverride; k.GetGroup() != "" || k.GetVersion() != "v1" || k.GetKind() != "Nonexistent" {
					t.Errorf("kind = %v", k)
				}
			},
		},
		"if namespaces are listed, then they are split": {
			args: []string{"--namespaces", "a,b"},
			check: func(t *testing.T, cfg config) {
				if !slices.Equal(cfg.namespaces, []string{"a", "b"}) {
					t.Errorf("namespaces = %v", cfg.namespaces)
				}
			},
		},
		"if an update filter is unknown, then parsing fails": {
			args: []string{"--update-filters", "status"}, wantErr: `unknown filter "status"`,
		},
		"if a kind override is malformed, then parsing fails": {
			args: []string{"--kind-override", "Nonexistent"}, wantErr: "want group/version/Kind",
		},
		"if an argument is left over, then parsing fails": {
			args: []string{"extra"}, wantErr: "unexpected arguments",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg)
		})
	}
}

func TestRunServesWhatTheFlagsDeclare(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "polyop")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	address := "unix://" + filepath.Join(dir, "sidecar.sock")
	cfg, err := parseFlags([]string{
		"--address", address,
		"--name", "e2e",
		"--controller-name", "windows",
		"--protocol-version", "9",
		"--kind-override", "examples.polyop.dev/v1/Nonexistent",
		"--update-filters", "generation",
		"--label-selector", "e2e=true",
		"--namespaces", "a",
		"--max-concurrent-reconciles", "2",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.sidecar.Logger = testr.New(t)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
	defer callCancel()
	resp, err := polyopv1alpha1.NewSidecarServiceClient(conn).Describe(callCtx,
		&polyopv1alpha1.DescribeRequest{ProtocolVersion: sidecar.ProtocolVersion}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetProtocolVersion() != 9 || resp.GetName() != "e2e" || len(resp.GetControllers()) != 1 {
		t.Fatalf("Describe = %v", resp)
	}
	c := resp.GetControllers()[0]
	if c.GetName() != "windows" || c.GetForKind().GetKind() != "Nonexistent" || c.GetForKind().GetGroup() != "examples.polyop.dev" ||
		c.GetPredicates().GetLabelSelector() != "e2e=true" || !slices.Equal(c.GetNamespaces(), []string{"a"}) ||
		c.GetMaxConcurrentReconciles() != 2 ||
		!slices.Equal(c.GetPredicates().GetUpdateFilters(), []sidecar.UpdateFilter{sidecar.GenerationChanged}) {
		t.Errorf("controller = %v", c)
	}
}
