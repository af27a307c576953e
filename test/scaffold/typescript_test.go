package scaffold_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/scaffold/typescript"
	"github.com/polyop/polyop/internal/testenv"
)

// TestATypeScriptProjectFromPolyopInitTestsGeneratesAndRenders makes a
// TypeScript project as a user would, outside the repository, on the SDK of
// this checkout (--sdk-source): init, a namespaced kind with a defaulting and
// a validating webhook, a second version with conversion, and a
// cluster-scoped kind with webhooks. It runs the
// project's own recipes (setup, test, lint), polyop generate, installs the
// CRD into a real API server, and renders the sample against the compiled
// sidecar.
func TestATypeScriptProjectFromPolyopInitTestsGeneratesAndRenders(t *testing.T) {
	if testing.Short() {
		t.Skip("installs npm packages and starts an API server; skipped with -short")
	}
	for _, tool := range []string{"node", "npm", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: the TypeScript project needs it (%v)", tool, err)
		}
	}
	src := testenv.RepoRoot()
	polyop := filepath.Join(t.TempDir(), "polyop")
	tsRun(t, src, "go", "build", "-o", polyop, "./cmd/polyop")

	dir := filepath.Join(t.TempDir(), "fleet")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tsRun(t, dir, polyop, "init", "--language", "typescript", "--domain", "example.com", "--sdk-source", src)
	tsRun(t, dir, polyop, "create", "api", "--group", "ship", "--version", "v1", "--kind", "Frigate")
	tsRun(t, dir, polyop, "create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Frigate", "--defaulting", "--programmatic-validation")
	tsRun(t, dir, polyop, "create", "api", "--group", "ship", "--version", "v1", "--kind", "Harbor", "--namespaced=false")
	tsRun(t, dir, polyop, "create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Harbor", "--defaulting", "--programmatic-validation")
	tsRun(t, dir, polyop, "create", "api", "--group", "ship", "--version", "v2", "--kind", "Frigate", "--controller=false")
	tsRun(t, dir, polyop, "create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Frigate", "--conversion")

	p, _, err := scaffold.LoadProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	tasks := typescript.Scaffolder{}.Tasks(p)
	// Setup packs the checkout's SDK (make dist-typescript, which runs
	// tsc -b on it): build it first under the lock the other suites'
	// builds take, so that Setup's tsc finds it up to date and writes
	// nothing while they read it.
	if err := testenv.BuildTypeScript("sdk/typescript"); err != nil {
		t.Fatal(err)
	}
	for _, line := range tasks.Setup {
		tsRun(t, dir, "sh", "-c", line)
	}
	if _, err := os.Stat(filepath.Join(dir, tasks.Stamp)); err != nil {
		t.Fatalf("setup made no stamp: %v", err)
	}

	t.Run("its tests pass: the sample reconciled, defaulted, validated and converted on the harness", func(t *testing.T) {
		var out string
		for _, line := range tasks.Test {
			out += tsRun(t, dir, "sh", "-c", line)
		}
		for _, want := range []string{"# pass 10", "# fail 0", "reconciling the sample desires a ConfigMap", "reconciling the sample marks it Ready", "validation refuses a message longer than 64",
			"defaulting fills in an empty message", "conversion copies a Frigate's fields"} {
			if !strings.Contains(out, want) {
				t.Errorf("the tests' output has no %q:\n%s", want, out)
			}
		}
	})
	t.Run("lint passes", func(t *testing.T) {
		for _, line := range tasks.Lint {
			tsRun(t, dir, "sh", "-c", line)
		}
	})

	frigate, harbor := p.FindResource("ship", "v1", "Frigate"), p.FindResource("ship", "v1", "Harbor")
	crdFile := filepath.Join(dir, filepath.FromSlash(frigate.CRDFile()))
	if !t.Run("generate writes the CRDs where the project expects them", func(t *testing.T) {
		_ = os.Remove(crdFile)
		tsRun(t, dir, polyop, "generate")
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(harbor.CRDFile()))); err != nil {
			t.Errorf("no CRD of Harbor: %v", err)
		}
		var crd struct {
			Spec struct {
				Versions []struct {
					Name    string
					Storage bool
				}
			}
		}
		b, err := os.ReadFile(crdFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatal(err)
		}
		stored := map[string]bool{}
		for _, v := range crd.Spec.Versions {
			stored[v.Name] = v.Storage
		}
		if len(stored) != 2 || !stored["v1"] || stored["v2"] {
			t.Errorf("the CRD's versions (name: stored) are %v, want v1 stored and v2", stored)
		}
	}) {
		t.FailNow()
	}

	sample := filepath.Join(dir, filepath.FromSlash(frigate.SampleFile()))
	t.Run("the API server serves the CRD and the sample round-trips through both versions", func(t *testing.T) {
		ctrllog.SetLogger(logr.Discard()) // envtest's own log
		env, err := testenv.Start(filepath.Dir(crdFile))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := env.Stop(); err != nil {
				t.Error(err)
			}
		})
		c, err := client.New(env.Config, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		b, err := os.ReadFile(sample)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			t.Fatal(err)
		}
		obj.SetNamespace("default")
		ctx := context.Background()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating the sample: %v", err)
		}
		for _, version := range []string{"ship.example.com/v1", "ship.example.com/v2"} {
			got := &unstructured.Unstructured{}
			got.SetAPIVersion(version)
			got.SetKind("Frigate")
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
				t.Fatalf("reading the sample as %s: %v", version, err)
			}
			if m, _, _ := unstructured.NestedString(got.Object, "spec", "message"); m != scaffold.SampleMessage {
				t.Errorf("the sample read as %s has spec.message %q, want %q", version, m, scaffold.SampleMessage)
			}
		}
	})

	t.Run("render reconciles the sample into its ConfigMap and Ready", func(t *testing.T) {
		out := tsRun(t, dir, polyop, append([]string{"render", "--object", sample, "--"}, p.Sidecar.Command...)...)
		var result struct {
			Reconcile struct {
				Status struct {
					Conditions []struct{ Type, Status, Reason string }
				}
				DesiredChildren []struct {
					Kind     string
					Metadata struct{ Name, Namespace string }
					Data     map[string]string
				} `json:"desiredChildren"`
			}
		}
		if err := yaml.Unmarshal([]byte(out), &result); err != nil {
			t.Fatalf("render's output: %v\n%s", err, out)
		}
		children := result.Reconcile.DesiredChildren
		if len(children) != 1 || children[0].Kind != "ConfigMap" || children[0].Metadata.Name != "frigate-sample" || children[0].Data["message"] != scaffold.SampleMessage {
			t.Errorf("render desires %+v, want one ConfigMap frigate-sample with message %q:\n%s", children, scaffold.SampleMessage, out)
		}
		if c := result.Reconcile.Status.Conditions; len(c) != 1 || c[0].Type != "Ready" || c[0].Status != "True" || c[0].Reason != "Reconciled" {
			t.Errorf("render's conditions are %+v, want Ready True Reconciled:\n%s", c, out)
		}
	})

	t.Run("render refuses creating a Frigate with a message of 100 characters, naming spec.message", func(t *testing.T) {
		b, err := os.ReadFile(sample)
		if err != nil {
			t.Fatal(err)
		}
		long := filepath.Join(t.TempDir(), "long.yaml")
		if err := os.WriteFile(long, bytes.Replace(b, []byte(scaffold.SampleMessage), []byte(strings.Repeat("x", 100)), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		out := tsRun(t, dir, polyop, append([]string{"render", "--object", long, "--admission", "create", "--"}, p.Sidecar.Command...)...)
		var result struct {
			Admission struct {
				Validate struct {
					Allowed bool
					Denied  struct {
						Message string
						Causes  []struct{ Field, Reason string }
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(out), &result); err != nil {
			t.Fatalf("render's output: %v\n%s", err, out)
		}
		v := result.Admission.Validate
		if v.Allowed || !strings.Contains(v.Denied.Message, "spec.message: Too long") || len(v.Denied.Causes) != 1 || v.Denied.Causes[0].Field != "spec.message" {
			t.Errorf("render's validation: %+v, want a denial with one cause on spec.message:\n%s", v, out)
		}
	})
}

// tsRun runs a command in dir and returns its standard output, failing the
// test with both outputs when it fails.
func tsRun(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s in %s: %v\n%s\n%s", name, strings.Join(args, " "), dir, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
