package run

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// These tests run polyop run as a user does, in the maintenancewindow
// example (a project with a PROJECT file whose sidecar declares a defaulter,
// a validator and a conversion), against a real API server: the control
// plane of KUBEBUILDER_ASSETS.

// examplePolyopRun returns a polyop run command in the example, built from
// this tree, with the control plane of KUBEBUILDER_ASSETS.
func examplePolyopRun(t *testing.T, ctx context.Context, args ...string) *exec.Cmd {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run make test (or make envtest)")
	}
	polyop, err := testenv.Build("./cmd/polyop")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, polyop, append([]string{"run"}, args...)...)
	cmd.Dir = filepath.Join(testenv.RepoRoot(), "examples", "go", "maintenancewindow")
	cmd.WaitDelay = time.Minute
	return cmd
}

// TestRunBringsTheSamplesToReadyOnALocalControlPlane runs polyop run as
// `make run` does: it builds the example's sidecar, starts a local control
// plane, the sidecar and the host with its webhooks, applies the samples and
// must see them Ready, then leaves nothing behind.
func TestRunBringsTheSamplesToReadyOnALocalControlPlane(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// --local: never touch a cluster the machine happens to be configured for.
	cmd := examplePolyopRun(t, ctx, "--local", "--apply-samples", "--exit-when-ready", "--timeout", "3m")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("output of polyop run:\n%s", out.String())
	if err != nil {
		t.Fatalf("polyop run failed: %v", err)
	}
	for _, want := range []string{
		ReadyLine, "export KUBECONFIG=", "metrics:  http://127.0.0.1:", "webhooks: https://127.0.0.1:",
		"MaintenanceWindow default/nightly is Ready", "status of ",
		"deleted ValidatingWebhookConfiguration maintenancewindow-polyop-run", "the local control plane stopped",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output does not contain %q", want)
		}
	}
	m := regexp.MustCompile(`export KUBECONFIG=(\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatal("polyop run printed no kubeconfig")
	}
	if _, err := os.Stat(filepath.Dir(m[1])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's temporary directory %s (kubeconfig, certificates) was left behind: %v", filepath.Dir(m[1]), err)
	}
}

// TestRunWiresWebhooksAndLeavesNothingBehindOnSIGTERM runs polyop run
// against a control plane the test owns, so that it can look at it once
// polyop is gone: the validator refuses an invalid object through kubectl,
// and after a SIGTERM to polyop no webhook configuration, process or
// temporary directory is left, and the CRD's conversion is as it was.
func TestRunWiresWebhooksAndLeavesNothingBehindOnSIGTERM(t *testing.T) {
	t.Parallel()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run make test (or make envtest)")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runScheme()
	k8s, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// A short TMPDIR of the test's own: every temporary directory polyop run
	// makes (sockets, certificates) is in it, and must be gone at the end.
	tmp, err := os.MkdirTemp("", "pr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := examplePolyopRun(t, ctx, "--kubeconfig", env.Kubeconfig, "--timeout", "3m")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		t.Logf("output of polyop run:\n%s", out.String())
	}()

	// Ready: the host serves and the webhook configurations are applied.
	testenv.Eventually(t, 5*time.Minute, "polyop run prints that it is ready", func() (bool, string) {
		return strings.Contains(out.String(), "press Ctrl-C to stop"), "not yet: " + testenv.Tail(out.String(), 3)
	})
	pids := map[string]int{}
	for _, name := range []string{"sidecar", "host"} {
		m := regexp.MustCompile(`started the ` + name + ` \(pid (\d+)\)`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("polyop run did not print the %s's pid", name)
		}
		pids[name], _ = strconv.Atoi(m[1])
	}

	t.Run("an invalid object is refused with the validator's field error", func(t *testing.T) {
		invalid := `apiVersion: examples.polyop.dev/v1
kind: MaintenanceWindow
metadata:
  name: too-long
  namespace: default
spec:
  start: "2026-01-01T00:00:00Z"
  duration: 25h
`
		kubectl := exec.CommandContext(ctx, env.Kubectl, "--kubeconfig", env.Kubeconfig, "apply", "-f", "-")
		kubectl.Stdin = strings.NewReader(invalid)
		got, err := kubectl.CombinedOutput()
		want := `spec.duration: Invalid value: "25h": must be between 1m and 24h`
		// The message is the sidecar's validator's (the CRD's schema allows
		// any duration string).
		if err == nil || !strings.Contains(string(got), want) {
			t.Errorf("kubectl apply of an invalid window: %v\n%s\nwant a refusal with %q", err, got, want)
		}
	})

	t.Run("the samples apply with the command polyop run printed", func(t *testing.T) {
		m := regexp.MustCompile(`(?m)^\[run\]   (kubectl apply .*)$`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatal("polyop run printed no kubectl apply of the samples")
		}
		args := strings.Fields(m[1])
		kubectl := exec.CommandContext(ctx, env.Kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args[1:]...)...)
		kubectl.Dir = cmd.Dir
		if got, err := kubectl.CombinedOutput(); err != nil || !strings.Contains(string(got), "maintenancewindow.examples.polyop.dev/nightly created") {
			t.Errorf("%s: %v\n%s\nwant the sample created", m[1], err, got)
		}
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("polyop run exited with %v after SIGTERM, want 0", err)
		}
	case <-ctx.Done():
		t.Fatal("polyop run did not exit after SIGTERM")
	}

	t.Run("no webhook configuration is left", func(t *testing.T) {
		var mutating admissionregistrationv1.MutatingWebhookConfigurationList
		var validating admissionregistrationv1.ValidatingWebhookConfigurationList
		if err := k8s.List(ctx, &mutating); err != nil {
			t.Fatal(err)
		}
		if err := k8s.List(ctx, &validating); err != nil {
			t.Fatal(err)
		}
		if n := len(mutating.Items) + len(validating.Items); n != 0 {
			t.Errorf("%d webhook configuration(s) left behind", n)
		}
	})
	t.Run("the CRD's conversion is restored", func(t *testing.T) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "maintenancewindows.examples.polyop.dev"}, crd); err != nil {
			t.Fatal(err)
		}
		if c := crd.Spec.Conversion; c == nil || c.Strategy != apiextensionsv1.NoneConverter || c.Webhook != nil {
			t.Errorf("the conversion is %s (webhook set: %t), want None", c.Strategy, c.Webhook != nil)
		}
	})
	t.Run("no process is left", func(t *testing.T) {
		for name, pid := range pids {
			// The child leads a process group: nothing it started may remain.
			if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("the %s's process group %d is still there (%v)", name, pid, err)
			}
		}
	})
	t.Run("no temporary directory is left", func(t *testing.T) {
		entries, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			t.Errorf("left behind in TMPDIR: %s", e.Name())
		}
	})
}

// syncBuffer is a bytes.Buffer that a process writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPolyopHostIsTheHostsCommandLine: polyop run starts `polyop host`, which
// must take the host's commands and flags as cmd/host does.
func TestPolyopHostIsTheHostsCommandLine(t *testing.T) {
	t.Parallel()
	polyop, err := testenv.Build("./cmd/polyop")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args     []string
		wantCode int
		want     string
	}{
		"if asked for help, then it lists the host's commands and flags": {
			args: []string{"host", "--help"}, want: "-sidecar-address",
		},
		"if given an unknown command, then it names the known ones and exits 2": {
			args: []string{"host", "frobnicate"}, wantCode: 2, want: "the commands are describe, rbac, ring, webhooks",
		},
		"if no cluster is configured, then it says so as the host does": {
			args: []string{"host", "--sidecar-address", "unix:///nonexistent.sock"}, wantCode: 1, want: "polyop host: no kubeconfig",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(polyop, tc.args...)
			cmd.Dir = t.TempDir()
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			out, err := cmd.CombinedOutput()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode || !strings.Contains(string(out), tc.want) {
				t.Errorf("polyop %s exited %d, want %d and %q:\n%s", strings.Join(tc.args, " "), code, tc.wantCode, tc.want, out)
			}
		})
	}
}

func TestRunOutsideAProjectSaysHowToMakeOne(t *testing.T) {
	t.Parallel()
	polyop, err := testenv.Build("./cmd/polyop")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(polyop, "run")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no PROJECT file in") || !strings.Contains(string(out), "polyop init") {
		t.Errorf("polyop run outside a project: %v\n%s", err, out)
	}
}

// TestRunAttachesToASidecarTheUserRuns: with --sidecar-address, polyop run
// neither builds nor starts a sidecar, calls the one given, and leaves it
// running. Over TCP, the host serves the Cluster service from the run's own
// folder (not the pod's /var/run/polyop, which a user's machine rarely lets
// them create) and polyop run says where.
func TestRunAttachesToASidecarTheUserRuns(t *testing.T) {
	t.Parallel()
	sidecarBin, err := testenv.Build("./examples/go/maintenancewindow")
	if err != nil {
		t.Fatal(err)
	}
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			t.Parallel()
			dir, err := os.MkdirTemp("", "pa-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			address := "unix://" + filepath.Join(dir, "sidecar.sock")
			if network == "tcp" {
				free, err := freeLocalAddress()
				if err != nil {
					t.Fatal(err)
				}
				address = "tcp://" + free
			}
			sc, err := testenv.StartProcess(t, "sidecar", sidecarBin, "--address", address)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sc.Stop)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := examplePolyopRun(t, ctx, "--local", "--sidecar-address", address, "--apply-samples", "--exit-when-ready", "--timeout", "3m")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err = cmd.Run()
			t.Logf("output of polyop run:\n%s", out.String())
			if err != nil {
				t.Fatalf("polyop run failed: %v", err)
			}
			for _, want := range []string{"using the sidecar at " + address, "MaintenanceWindow default/nightly is Ready"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the output does not contain %q", want)
				}
			}
			served := regexp.MustCompile(`the host serves the Cluster service at (unix://\S+/` + tmpDirPrefix + `\S*/cluster\.sock): a sidecar you run yourself reads the cluster with POLYOP_CLUSTER_ADDRESS=(\S+)`).FindStringSubmatch(out.String())
			switch {
			case network == "tcp" && (served == nil || served[1] != served[2]):
				t.Errorf("polyop run does not say that the host serves the Cluster service in the run's folder, and how the sidecar finds it")
			case network == "unix" && strings.Contains(out.String(), "serves the Cluster service at"):
				t.Errorf("polyop run moved the Cluster service away from beside the sidecar's socket, where the SDKs look")
			}
			if strings.Contains(out.String(), "building the sidecar") {
				t.Error("polyop run built a sidecar although one was given")
			}
			if sc.Exited() {
				t.Errorf("the user's sidecar exited with polyop run: %v", sc.ExitError())
			}
		})
	}
}
