package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/testenv"
)

// These tests run the host binary as a user would, against a real API server
// where it gets that far.

var (
	env                     *testenv.Env
	hostBin, testSidecarBin string
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Suite{
		CRDDirs: []string{filepath.Join(testenv.RepoRoot(), "examples", "go", "maintenancewindow", "config", "crd")},
		Binaries: map[string]*string{
			"./cmd/host":         &hostBin,
			"./test/testsidecar": &testSidecarBin,
		},
		Env: &env,
	}.Run(m))
}

// run runs the host with args and env (added to a clean environment) to its
// end, and returns its exit code and output.
func run(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(hostBin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func TestHelpListsTheCommandsAndTheFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"help"}} {
		code, out := run(t, nil, args...)
		if code != 0 {
			t.Errorf("host %s exited %d:\n%s", args[0], code, out)
		}
		for _, want := range []string{"host describe", "host webhooks", "host rbac", "host ring"} {
			if !strings.Contains(out, want) {
				t.Errorf("host %s does not list %q:\n%s", args[0], want, out)
			}
		}
	}
	_, out := run(t, nil, "--help")
	for _, want := range []string{"-sidecar-address", "-max-object-size", "-health-probe-bind-address", "-zap-stacktrace-level"} {
		if !strings.Contains(out, want) {
			t.Errorf("host --help does not list the flag %s:\n%s", want, out)
		}
	}
}

func TestAnUnknownCommandIsAnErrorNamingTheKnownOnes(t *testing.T) {
	t.Parallel()
	code, out := run(t, nil, "frobnicate")
	if code == 0 || !strings.Contains(out, `unknown command "frobnicate": the commands are describe, rbac, ring, webhooks`) {
		t.Errorf("host frobnicate exited %d:\n%s", code, out)
	}
	code, out = run(t, nil, "--health-probe-bind-address", "0", "describe")
	if code == 0 || !strings.Contains(out, `unexpected argument "describe": a command comes first`) {
		t.Errorf("a command after a flag: exited %d:\n%s", code, out)
	}
}

func TestAMissingKubeconfigIsSaidPlainly(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env  []string
		args []string
		want string
	}{
		"if nothing says where the cluster is, the error lists where the host looked": {
			want: "polyop host: no kubeconfig: --kubeconfig and KUBECONFIG are not set, there is no ~/.kube/config, and the host does not run in a pod; pass --kubeconfig",
		},
		"if --kubeconfig names a missing file, the error names it and the flag": {
			args: []string{"--kubeconfig", "/nonexistent/kubeconfig"},
			want: "polyop host: loading the kubeconfig /nonexistent/kubeconfig (--kubeconfig): stat /nonexistent/kubeconfig: no such file or directory",
		},
		"if KUBECONFIG names a missing file, the error names it": {
			env:  []string{"KUBECONFIG=/nonexistent/kubeconfig"},
			want: "(KUBECONFIG)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, out := run(t, tc.env, tc.args...)
			if code != 1 || !strings.Contains(out, tc.want) {
				t.Errorf("exited %d, want 1 and %q:\n%s", code, tc.want, out)
			}
			if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; lines != 1 || strings.Contains(out, "stacktrace") {
				t.Errorf("want one line, without a stack trace; got %d:\n%s", lines, out)
			}
		})
	}
}

func TestAnAddressInUseNamesTheFlagThatSetsIt(t *testing.T) {
	t.Parallel()
	for flag, scheme := range map[string]string{
		"--health-probe-bind-address": "",
		"--metrics-bind-address":      "",
		"--pprof-bind-address":        "",
		"--cluster-address":           "tcp://",
	} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()

			dir, err := os.MkdirTemp("", "po-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			socket := "unix://" + filepath.Join(dir, "sidecar.sock")
			sc, err := testenv.StartProcess(t, "sidecar", testSidecarBin, "--address", socket)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sc.Stop)

			args := []string{
				"--kubeconfig", env.Kubeconfig, "--sidecar-address", socket, "--webhook-port", "0",
				"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--metrics-secure=false",
				flag, scheme + taken.Addr().String(),
			}
			host, err := testenv.StartProcess(t, "host", hostBin, args...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(host.Stop)
			code, err := host.Wait(60 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			last := testenv.Tail(host.Output(), 1)
			if code != 1 || !strings.Contains(last, "address already in use") || strings.Count(last, flag) != 2 {
				t.Errorf("exited %d, want 1 and a last line naming %s (to stop or to change):\n%s", code, flag, testenv.Tail(host.Output(), 10))
			}
		})
	}
}
