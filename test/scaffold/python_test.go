package scaffold_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/polyop/polyop/internal/scaffold"
	_ "github.com/polyop/polyop/internal/scaffold/python"
	"github.com/polyop/polyop/internal/testenv"
)

// TestPythonProject makes a Python project as a user would, outside this
// repository (the SDK from this checkout, through --sdk-source), and checks
// it once for everything: its own tests and checks pass, polyop generate
// writes CRDs the API server serves and round-trips a sample through, and
// polyop render reconciles and refuses as the scaffolded code says.
func TestPythonProject(t *testing.T) {
	if testing.Short() {
		t.Skip("installs a virtualenv from PyPI and starts a control plane: not with -short")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	// envtest logs through controller-runtime: its errors to stderr.
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	polyop := filepath.Join(tmp, "polyop")
	build := exec.CommandContext(ctx, "go", "build", "-o", polyop, "./cmd/polyop")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/polyop: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "frigates")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	sh := func(t *testing.T, lines []string) {
		t.Helper()
		for _, line := range lines {
			run(t, "sh", "-c", line)
		}
	}

	run(t, polyop, "init", "--language", "python", "--domain", "example.com", "--sdk-source", testenv.RepoRoot())
	run(t, polyop, "create", "api", "--group", "ship", "--version", "v1", "--kind", "Frigate")
	run(t, polyop, "create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Frigate", "--defaulting", "--programmatic-validation")
	run(t, polyop, "create", "api", "--group", "ship", "--version", "v2", "--kind", "Frigate", "--controller=false")
	run(t, polyop, "create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Frigate", "--conversion")
	p, _, err := scaffold.LoadProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := scaffold.For(scaffold.Python)
	if err != nil {
		t.Fatal(err)
	}
	tasks := s.Tasks(p)
	start := time.Now()
	sh(t, tasks.Setup)
	t.Logf("setup (a virtualenv, the SDK's wheel, the project and its dev tools): %s", time.Since(start).Round(time.Second))
	if _, err := os.Stat(filepath.Join(dir, tasks.Stamp)); err != nil {
		t.Fatalf("setup made no stamp: %v", err)
	}

	t.Run("its tests pass", func(t *testing.T) {
		out := run(t, "sh", "-c", strings.Join(tasks.Test, " && "))
		if !strings.Contains(out, "9 passed") {
			t.Errorf("pytest ran other tests than the 9 scaffolded:\n%s", out)
		}
	})
	t.Run("ruff and mypy --strict find nothing", func(t *testing.T) {
		sh(t, tasks.Lint)
	})

	run(t, polyop, "generate")
	r := p.FindResource("ship", "v1", "Frigate")
	crd, err := os.ReadFile(filepath.Join(dir, r.CRDFile()))
	if err != nil {
		t.Fatalf("polyop generate wrote no %s: %v", r.CRDFile(), err)
	}
	t.Run("the CRD has both versions, v1 stored", func(t *testing.T) {
		var got struct {
			Spec struct {
				Versions []struct {
					Name    string
					Storage bool
				}
			}
		}
		if err := yaml.Unmarshal(crd, &got); err != nil {
			t.Fatal(err)
		}
		stored := map[string]bool{}
		for _, v := range got.Spec.Versions {
			stored[v.Name] = v.Storage
		}
		if len(stored) != 2 || !stored["v1"] || stored["v2"] {
			t.Errorf("versions (name: storage) %v, want v1: true, v2: false", stored)
		}
	})

	t.Run("the API server serves the CRD and round-trips the sample", func(t *testing.T) {
		env, err := testenv.Start(filepath.Join(dir, scaffold.CRDDir))
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := env.Stop(); err != nil {
				t.Error(err)
			}
		}()
		c, err := client.New(env.Config, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sample := &unstructured.Unstructured{}
		data, err := os.ReadFile(filepath.Join(dir, r.SampleFile()))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &sample.Object); err != nil {
			t.Fatal(err)
		}
		sample.SetNamespace("default")
		if err := c.Create(ctx, sample); err != nil {
			t.Fatalf("create %s: %v", r.SampleFile(), err)
		}
		for _, version := range []string{"v1", "v2"} {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(schema.GroupVersionKind{Group: r.APIGroup(), Version: version, Kind: r.Kind})
			if err := c.Get(ctx, client.ObjectKeyFromObject(sample), got); err != nil {
				t.Fatalf("get the sample at %s: %v", version, err)
			}
			if message, _, _ := unstructured.NestedString(got.Object, "spec", "message"); message != scaffold.SampleMessage {
				t.Errorf("the sample at %s has spec.message %q, want %q", version, message, scaffold.SampleMessage)
			}
		}
	})

	t.Run("render reconciles the sample into a ConfigMap with its message", func(t *testing.T) {
		out := run(t, polyop, append([]string{"render", "--object", r.SampleFile(), "--"}, p.Sidecar.Command...)...)
		var got struct {
			Reconcile struct {
				DesiredChildren []map[string]any `json:"desiredChildren"`
			}
		}
		if err := yaml.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(got.Reconcile.DesiredChildren) != 1 {
			t.Fatalf("render: want one child:\n%s", out)
		}
		child := &unstructured.Unstructured{Object: got.Reconcile.DesiredChildren[0]}
		message, _, _ := unstructured.NestedString(child.Object, "data", "message")
		if child.GetKind() != "ConfigMap" || child.GetName() != scaffold.SampleName(r) || message != scaffold.SampleMessage {
			t.Errorf("render: want the ConfigMap %s with data.message %q:\n%s", scaffold.SampleName(r), scaffold.SampleMessage, out)
		}
	})

	t.Run("render refuses a message of 100 characters naming spec.message", func(t *testing.T) {
		long := filepath.Join(t.TempDir(), "long.yaml")
		data, err := os.ReadFile(filepath.Join(dir, r.SampleFile()))
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.Replace(string(data), scaffold.SampleMessage, strings.Repeat("x", 100), 1))
		if err := os.WriteFile(long, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out := run(t, polyop, append([]string{"render", "--object", long, "--admission", "create", "--"}, p.Sidecar.Command...)...)
		var got struct {
			Admission struct {
				Validate struct {
					Allowed bool
					Denied  struct {
						Causes []struct{ Field, Reason string }
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		v := got.Admission.Validate
		if v.Allowed || len(v.Denied.Causes) != 1 || v.Denied.Causes[0].Field != "spec.message" || v.Denied.Causes[0].Reason != "FieldValueTooLong" {
			t.Errorf("render --admission create: want a denial of spec.message as too long:\n%s", out)
		}
	})
}
