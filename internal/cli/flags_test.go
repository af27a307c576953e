package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/polyop/polyop/internal/controlplane"
	"github.com/polyop/polyop/internal/host"
	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/version"
)

// run runs polyop with args and returns its output and error.
func run(args ...string) (string, error) {
	cmd := NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestRenderFlags(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args    []string
		wantErr string
	}{
		"if there is no --object, it is required": {
			args:    []string{"render", "--", "sidecar"},
			wantErr: `required flag(s) "object" not set`,
		},
		"if there is neither a command nor an address, the error shows both ways": {
			args:    []string{"render", "--object", "o.yaml"},
			wantErr: `no sidecar: give its command after "--" (polyop render --object FILE -- COMMAND ARGS...) or the address of a running one with --sidecar-address`,
		},
		"if the command comes without --, the error says where it goes": {
			args:    []string{"render", "--object", "o.yaml", "python", "main.py"},
			wantErr: `unexpected argument "python": the sidecar command comes after "--"`,
		},
		"if both a command and an address are given, it is one or the other": {
			args:    []string{"render", "--object", "o.yaml", "--sidecar-address", "unix:///s.sock", "--", "sidecar"},
			wantErr: `give a sidecar command after "--" or --sidecar-address, not both`,
		},
		"if --admission is not an operation, the error lists them": {
			args:    []string{"render", "--object", "o.yaml", "--admission", "connect", "--", "sidecar"},
			wantErr: `unknown --admission "connect": use create, update or delete`,
		},
		"if --admission update has no --old-object, the error asks for it": {
			args:    []string{"render", "--object", "o.yaml", "--admission", "update", "--", "sidecar"},
			wantErr: "--admission update needs the object as it was: give it with --old-object",
		},
		"if --old-object comes without --admission update, it is refused": {
			args:    []string{"render", "--object", "o.yaml", "--old-object", "old.yaml", "--", "sidecar"},
			wantErr: "--old-object is for --admission update only",
		},
		"if --output is not yaml or json, the error says so": {
			args:    []string{"render", "--object", "o.yaml", "-o", "table", "--", "sidecar"},
			wantErr: `unknown --output "table": use yaml or json`,
		},
		"if the object file is missing, the error names it": {
			args:    []string{"render", "--object", "/nonexistent/o.yaml", "--", "sidecar"},
			wantErr: "open /nonexistent/o.yaml: no such file or directory",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := run(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("polyop %s: error = %v; want %q", strings.Join(tc.args, " "), err, tc.wantErr)
			}
		})
	}
}

func TestRenderFlagsLeaveTheCommandsFlagsToIt(t *testing.T) {
	t.Parallel()
	cmd := NewRenderCommand()
	cmd.SetArgs([]string{"--object", "o.yaml", "--", "python", "-m", "tenant", "--log-level", "DEBUG"})
	var got []string
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		got = args
		return nil
	}
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"python", "-m", "tenant", "--log-level", "DEBUG"}; !slices.Equal(got, want) {
		t.Errorf("command = %q, want %q", got, want)
	}
}

func TestRootHelpListsTheCommands(t *testing.T) {
	t.Parallel()
	out, err := run("--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"render      Run one Reconcile", "version     Print the versions of polyop, its host, SDKs, protocol and local control plane"} {
		if !strings.Contains(out, want) {
			t.Errorf("polyop --help does not list %q:\n%s", want, out)
		}
	}
	out, err = run("render", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Examples:", "polyop render --object config/samples/widget.yaml -- go run ./cmd/sidecar", "--sidecar-address string", "--admission string"} {
		if !strings.Contains(out, want) {
			t.Errorf("polyop render --help does not show %q:\n%s", want, out)
		}
	}
}

// TestRunHelpShowsHowToDebugTheSidecar: polyop run --help shows, for each
// language, the sidecar of a generated project started under its debugger
// (its entry point as polyop init writes it into the PROJECT file), polyop
// run attached to it with the host's own deadline flag, and the page that
// says more.
func TestRunHelpShowsHowToDebugTheSidecar(t *testing.T) {
	t.Parallel()
	out, err := run("run", "--help")
	if err != nil {
		t.Fatal(err)
	}
	const address = "unix:///tmp/fleet/sidecar.sock"
	sidecar := func(l scaffold.Language) scaffold.SidecarCommands {
		t.Helper()
		s, err := scaffold.For(l)
		if err != nil {
			t.Fatal(err)
		}
		p := &scaffold.Project{Name: "fleet", Domain: "example.com", Language: l, PolyopVersion: "0.1.0"}
		if err := s.Defaults(p); err != nil {
			t.Fatal(err)
		}
		return p.Sidecar
	}
	goSidecar, pySidecar, tsSidecar := sidecar(scaffold.Go), sidecar(scaffold.Python), sidecar(scaffold.TypeScript)
	want := []string{
		// go build -o bin/sidecar ./cmd/sidecar: dlv debug builds the same package.
		"dlv debug " + goSidecar.Build[len(goSidecar.Build)-1] + " -- --address " + address,
		// .venv/bin/python -m fleet
		pySidecar.Command[0] + " -m debugpy --listen 5678 " + strings.Join(pySidecar.Command[1:], " ") + " --address " + address,
		// node dist/main.js
		tsSidecar.Command[0] + " --inspect " + strings.Join(tsSidecar.Command[1:], " ") + " --address " + address,
		"polyop run --sidecar-address " + address + " -- --reconcile-timeout=1h",
		"docs/debugging.md",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("polyop run --help does not show %q:\n%s", w, out)
		}
	}
	fs := flag.NewFlagSet("host", flag.ContinueOnError)
	opts := host.NewOptions()
	opts.BindFlags(fs)
	if fs.Lookup("reconcile-timeout") == nil {
		t.Error("the host has no --reconcile-timeout flag, which polyop run --help shows")
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := run("version")
	if err != nil {
		t.Fatal(err)
	}
	v := CurrentVersion()
	if v.Version != version.Version || v.Host != v.Version || v.SDKs != (SDKVersions{Go: v.Version, Python: v.Version, TypeScript: v.Version}) {
		t.Errorf("versions %+v: want polyop's %s for polyop, its host and every SDK", v, version.Version)
	}
	for _, want := range []string{"polyop:     " + v.Version, "host:       " + v.Version, "sdk/go:     " + v.Version, "sdk/python: " + v.Version,
		"sdk/ts:     " + v.Version, "protocol:   v1alpha1", "kubernetes: " + controlplane.Version(), "host image: ghcr.io/polyop/polyop-host:" + v.Version,
		"go:         go", "platform:   " + v.Platform} {
		if !strings.Contains(out, want) {
			t.Errorf("polyop version does not print %q:\n%s", want, out)
		}
	}
	out, err = run("version", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got VersionInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("polyop version -o json printed no JSON: %v\n%s", err, out)
	}
	if got != v {
		t.Errorf("polyop version -o json = %+v, want %+v", got, v)
	}
	if _, err := run("version", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), `unknown --output "yaml": use text or json`) {
		t.Errorf("polyop version -o yaml: error = %v; want one naming the formats", err)
	}
}
