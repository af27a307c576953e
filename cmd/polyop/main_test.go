package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/testenv"
)

// These tests build polyop and run `polyop render` as a user does, against
// real sidecar processes: the Go and Python examples of this repository.

var polyop string

func TestMain(m *testing.M) {
	var err error
	if polyop, err = testenv.Build("./cmd/polyop"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testenv.CleanBuilds()
	os.Exit(code)
}

// result is one run of polyop.
type result struct {
	stdout, stderr string
	// code is the exit code.
	code int
	// tmp is the TMPDIR polyop ran with: where it makes the sidecar's
	// socket.
	tmp string
}

// start starts polyop with args in the repository's root, with a TMPDIR of
// its own.
func start(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, string) {
	t.Helper()
	var stdout bytes.Buffer
	cmd, stderr, tmp := startWith(t, &stdout, args...)
	return cmd, &stdout, stderr, tmp
}

// startWith is start with stdout as polyop's standard output.
func startWith(t *testing.T, stdout io.Writer, args ...string) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	// Not t.TempDir(): a unix socket's path is limited to about 100 bytes.
	tmp, err := os.MkdirTemp("", "po-render-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	cmd := exec.Command(polyop, args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stderr, tmp
}

// polyopRun runs polyop with args to the end.
func polyopRun(t *testing.T, args ...string) result {
	t.Helper()
	cmd, stdout, stderr, tmp := start(t, args...)
	err := cmd.Wait()
	var exit *exec.ExitError
	code := 0
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String(), code: code, tmp: tmp}
	t.Logf("polyop %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	return r
}

// assertCleanedUp checks that polyop left nothing behind in its TMPDIR: no
// temporary directory, no socket.
func assertCleanedUp(t *testing.T, tmp string) {
	t.Helper()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("polyop left %s behind in its TMPDIR", e.Name())
	}
}

// sidecarGroup is the process group of the sidecar polyop started in tmp,
// found by the socket path in its arguments, or 0 when none runs.
func sidecarGroup(tmp string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, []byte(tmp)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if pgid, err := syscall.Getpgid(pid); err == nil {
			return pgid
		}
	}
	return 0
}

// groupMembers are the processes of process group pgid still alive (not
// zombies).
func groupMembers(pgid int) []string {
	var out []string
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so count
		// from its closing parenthesis.
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 2 && fields[0] != "Z" && fields[2] == strconv.Itoa(pgid) {
			out = append(out, string(b[:bytes.LastIndexByte(b, ')')+1]))
		}
	}
	return out
}

func assertContains(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q", want)
		}
	}
}

const maintenanceWindowSample = "examples/go/maintenancewindow/config/samples/examples_v1_maintenancewindow.yaml"

// renderGoExample builds the Go example sidecar pkg and renders sample with
// it, failing the test unless polyop exits 0.
func renderGoExample(t *testing.T, pkg, sample string) result {
	t.Helper()
	sidecar, err := testenv.Build(pkg)
	if err != nil {
		t.Fatal(err)
	}
	r := polyopRun(t, "render", "--object", sample, "--", sidecar)
	if r.code != 0 {
		t.Fatalf("polyop render exited %d: %s", r.code, r.stderr)
	}
	return r
}

func TestRenderGoExample(t *testing.T) {
	r := renderGoExample(t, "./examples/go/maintenancewindow", maintenanceWindowSample)
	assertContains(t, r.stdout,
		"sidecar: maintenancewindow\ncontroller: maintenancewindow\nobject: MaintenanceWindow default/nightly\nreconcile:\n  requeueAfter: ",
		"  status:\n    phase: ",
		"    observedGeneration: 1\n",
		"    - type: Ready\n      status: \"True\"\n",
		"  desiredChildren: []\n  childrenComplete: false\n",
	)
	assertCleanedUp(t, r.tmp)
}

// TestRenderGoExampleThroughTheClusterService renders the memcached example,
// whose controller-runtime reconciler reads the Memcached and its Deployment
// through the Cluster service and creates the Deployment itself: render
// serves it the sample and prints the writes it made, applying none.
func TestRenderGoExampleThroughTheClusterService(t *testing.T) {
	r := renderGoExample(t, "./examples/go/memcached", "examples/go/memcached/config/samples/examples_v1_memcached.yaml")
	assertContains(t, r.stdout,
		"sidecar: memcached-operator\ncontroller: memcached\nobject: Memcached default/memcached-sample\nreconcile:\n",
		"writes:\n- verb: update\n  apiVersion: examples.polyop.dev/v1\n  kind: Memcached\n  name: default/memcached-sample\n  subresource: status\n",
		"        message: Starting reconciliation\n",
		"- verb: update\n  apiVersion: examples.polyop.dev/v1\n  kind: Memcached\n  name: default/memcached-sample\n  object:\n",
		"      - examples.polyop.dev/memcached-finalizer\n",
		"- verb: create\n  apiVersion: apps/v1\n  kind: Deployment\n  name: default/memcached-sample\n  object:\n",
		"      replicas: 2\n",
		"            image: memcached:",
	)
	assertCleanedUp(t, r.tmp)
}

// TestRenderGoExampleReadsTheSamplesOtherObjects renders the website
// example, whose sample holds the ConfigMap of content the Website reads
// through the Cluster service: render serves it, so the Website publishes it.
func TestRenderGoExampleReadsTheSamplesOtherObjects(t *testing.T) {
	r := renderGoExample(t, "./examples/go/website", "examples/go/website/config/samples/examples_v1_website.yaml")
	assertContains(t, r.stdout,
		"object: Website default/hello\n",
		"      reason: Progressing\n",
		"        <h1>Hello from polyop</h1>\n",
		"      name: hello-published\n",
	)
	assertContains(t, r.stderr, `not ConfigMap "hello-content" (line 1), which the Cluster service holds`)
	assertCleanedUp(t, r.tmp)
}

func TestRenderGoExampleWithGoRunStopsTheProgramGoRunBuilt(t *testing.T) {
	r := polyopRun(t, "render", "--object", maintenanceWindowSample, "--", "go", "run", "./examples/go/maintenancewindow")
	if r.code != 0 {
		t.Fatalf("polyop render exited %d: %s", r.code, r.stderr)
	}
	assertContains(t, r.stdout, "controller: maintenancewindow", "    - type: Ready\n      status: \"True\"\n")
	assertCleanedUp(t, r.tmp)
	if pgid := sidecarGroup(r.tmp); pgid != 0 {
		t.Errorf("the sidecar's processes run on after polyop exited: %v", groupMembers(pgid))
	}
}

func TestRenderPythonExample(t *testing.T) {
	py := filepath.Join(testenv.RepoRoot(), ".venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no Python virtualenv with the polyop SDK (run make .venv): %v", err)
	}
	sample := "examples/python/tenant/config/samples/tenant.yaml"

	t.Run("a tenant's children and status", func(t *testing.T) {
		// The tenant's quota, which the reconciler lists by its declared
		// index (the owning Tenant's name).
		quota := filepath.Join(t.TempDir(), "quota.yaml")
		if err := os.WriteFile(quota, []byte(`apiVersion: v1
kind: ResourceQuota
metadata:
  name: tenant-payments
  ownerReferences:
  - {apiVersion: examples.polyop.dev/v1, kind: Tenant, name: payments, uid: u-1, controller: true}
spec:
  hard:
    pods: "50"
status:
  used:
    pods: "7"
`), 0o600); err != nil {
			t.Fatal(err)
		}
		r := polyopRun(t, "render", "--object", sample, "--cluster-objects", quota, "--", py, "-m", "tenant")
		if r.code != 0 {
			t.Fatalf("polyop render exited %d: %s", r.code, r.stderr)
		}
		assertContains(t, r.stdout,
			"sidecar: tenant-operator\ncontroller: tenant\nobject: Tenant default/payments\n",
			"  - apiVersion: v1\n    kind: ResourceQuota\n",
			"  - apiVersion: v1\n    kind: LimitRange\n",
			"    kind: ConfigMap\n",
			"      name: tenant-payments\n      namespace: default\n",
			// From the ResourceQuota, listed by the index.
			"    used:\n      pods: \"7\"\n",
			"    - type: Ready\n      status: \"True\"\n",
			"  childrenComplete: true\n",
			"  events:\n  - type: Normal\n    reason: Reconciled\n",
		)
		assertCleanedUp(t, r.tmp)
	})

	t.Run("an invalid tenant is denied on create with the field errors", func(t *testing.T) {
		invalid := filepath.Join(t.TempDir(), "invalid.yaml")
		if err := os.WriteFile(invalid, []byte("apiVersion: examples.polyop.dev/v1\nkind: Tenant\nmetadata:\n  name: bad\nspec:\n  owner: \"\"\n  quota:\n    cpu: \"-1\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := polyopRun(t, "render", "--object", invalid, "--admission", "create", "--", py, "-m", "tenant")
		if r.code != 0 {
			t.Fatalf("polyop render exited %d: %s", r.code, r.stderr)
		}
		assertContains(t, r.stdout,
			"admission:\n  operation: CREATE\n  validate:\n    allowed: false\n    denied:\n      code: 422\n      reason: Invalid\n",
			"field: spec.owner",
			"field: spec.quota.cpu",
		)
		if strings.Contains(r.stdout, "reconcile:") {
			t.Errorf("a denied tenant was reconciled")
		}
	})
}

func TestRenderErrors(t *testing.T) {
	sidecar, err := testenv.Build("./examples/go/maintenancewindow")
	if err != nil {
		t.Fatal(err)
	}
	website := "examples/go/website/config/samples/examples_v1_website.yaml"
	malformed := filepath.Join(t.TempDir(), "malformed.yaml")
	if err := os.WriteFile(malformed, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {x: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args    []string
		wantErr []string
	}{
		"if the sidecar exits before it serves, the error shows how and the end of its output": {
			args:    []string{"render", "--object", maintenanceWindowSample, "--", "sh", "-c", "echo 'cannot load the model' >&2; exit 3", "sh"},
			wantErr: []string{"Error: the sidecar exited before it served", "exit status 3", "the end of its output:\ncannot load the model"},
		},
		"if none of a file's objects is of a kind the sidecar reconciles, the error names them and the kinds it reconciles": {
			args:    []string{"render", "--object", website, "--", sidecar},
			wantErr: []string{`Error: none of the 2 objects of ` + website + ` (ConfigMap "hello-content" (line 1), Website "hello" (line 12)) is of a kind sidecar "maintenancewindow" reconciles: it reconciles MaintenanceWindow.examples.polyop.dev/v1`},
		},
		"if the object's kind has no controller, the error names the sidecar's kinds": {
			args:    []string{"render", "--object", "examples/go/memcached/config/samples/examples_v1_memcached.yaml", "--", sidecar},
			wantErr: []string{`Error: sidecar "maintenancewindow" has no controller for Memcached.examples.polyop.dev/v1: it reconciles MaintenanceWindow.examples.polyop.dev/v1 (controller "maintenancewindow")`},
		},
		"if the object is malformed YAML, the error names the file and line": {
			args:    []string{"render", "--object", malformed, "--", sidecar},
			wantErr: []string{"Error: " + malformed + ":5: malformed YAML: "},
		},
		"if the command does not exist, the error names it": {
			args:    []string{"render", "--object", maintenanceWindowSample, "--", "/nonexistent/sidecar"},
			wantErr: []string{`Error: starting the sidecar command "/nonexistent/sidecar"`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := polyopRun(t, tc.args...)
			if r.code != 1 {
				t.Errorf("polyop exited %d, want 1", r.code)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not contain %q:\n%s", want, r.stderr)
				}
			}
			if r.stdout != "" {
				t.Errorf("polyop printed a result beside the error:\n%s", r.stdout)
			}
			assertCleanedUp(t, r.tmp)
		})
	}
}

func TestRenderStopsTheSidecarBeforeWritingToAReaderThatWentAway(t *testing.T) {
	sidecar, err := testenv.Build("./examples/go/maintenancewindow")
	if err != nil {
		t.Fatal(err)
	}
	// polyop render ... | head: the reader is gone when polyop writes, and
	// the write ends polyop with SIGPIPE.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	cmd, stderr, tmp := startWith(t, w, "render", "--object", maintenanceWindowSample, "--", sidecar)
	_ = w.Close()
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGPIPE {
		t.Logf("polyop ended with %v, not SIGPIPE; stderr:\n%s", err, stderr)
	}
	if pgid := sidecarGroup(tmp); pgid != 0 {
		t.Errorf("the sidecar runs on after polyop exited: %v", groupMembers(pgid))
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	assertCleanedUp(t, tmp)
}

func TestRenderStopsTheSidecarOnSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			// A sidecar that never serves: polyop waits for it until the
			// signal comes. The shell passes the signal to nothing, so
			// polyop must end the whole group.
			cmd, _, stderr, tmp := start(t, "render", "--object", maintenanceWindowSample, "--", "sh", "-c", "sleep 300; : \"$@\"", "sh")
			var pgid int
			testenv.Eventually(t, 30*time.Second, "the sidecar command runs", func() (bool, string) {
				pgid = sidecarGroup(tmp)
				return pgid != 0, "no process with the socket's path in its arguments"
			})
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 130 {
					t.Errorf("polyop ended with %v, want exit status 130; stderr:\n%s", err, stderr)
				}
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("polyop did not exit within 30s of %s", sig)
			}
			testenv.Eventually(t, 10*time.Second, "the sidecar's processes are gone", func() (bool, string) {
				m := groupMembers(pgid)
				return len(m) == 0, fmt.Sprint(m)
			})
			assertCleanedUp(t, tmp)
		})
	}
}
