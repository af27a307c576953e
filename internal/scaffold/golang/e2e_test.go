package golang_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/scaffold/golang"
	"github.com/polyop/polyop/internal/testenv"
)

// TestAGoProjectFromInitToARenderedChild makes a Go project as a user would
// (polyop init, create api, create webhook, generate), runs its own setup,
// build, test and lint recipes, installs its CRD in a real API server and
// runs its sidecar through polyop render.
func TestAGoProjectFromInitToARenderedChild(t *testing.T) {
	if testing.Short() {
		t.Skip("makes a Go project, downloads its modules and builds it: skipped with -short")
	}
	// envtest logs through controller-runtime: errors only, and no warning
	// that no logger was set.
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	polyop, err := testenv.Build("./cmd/polyop")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(testenv.CleanBuilds)
	dir := t.TempDir()
	// The project lives outside this repository: no go.work reaches it.
	env := append(os.Environ(), "GOWORK=off")
	polyopIn := func(t *testing.T, args ...string) string {
		t.Helper()
		return runIn(t, dir, env, polyop, args...)
	}

	polyopIn(t, "init", "--language", "go", "--domain", "example.com", "--repo", "example.com/widgets", "--sdk-source", repoRoot(t))
	polyopIn(t, "create", "api", "--group", "ship", "--version", "v1", "--kind", "Frigate")
	polyopIn(t, "create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Frigate", "--defaulting", "--programmatic-validation")
	polyopIn(t, "create", "api", "--group", "ship", "--version", "v2", "--kind", "Frigate", "--controller=false")
	polyopIn(t, "create", "webhook", "--group", "ship", "--version", "v2", "--kind", "Frigate", "--conversion")
	polyopIn(t, "generate")
	// A kind added to a version whose deep copy functions controller-gen
	// wrote: its own are appended in controller-gen's names, and the
	// project still builds.
	polyopIn(t, "create", "api", "--group", "ship", "--version", "v2", "--kind", "Admiral", "--namespaced=false")

	p, _, err := scaffold.LoadProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	frigate := p.FindResource("ship", "v1", "Frigate")
	crdFile := filepath.Join(dir, filepath.FromSlash(frigate.CRDFile()))

	tasks := golang.Scaffolder{}.Tasks(p)
	for _, recipe := range []struct {
		name  string
		lines []string
	}{{"setup", tasks.Setup}, {"build", tasks.Build}, {"test", tasks.Test}, {"lint", tasks.Lint}} {
		start := time.Now()
		for _, line := range recipe.lines {
			runIn(t, dir, env, "sh", "-c", line)
		}
		t.Logf("%s: %s", recipe.name, time.Since(start).Round(time.Second))
	}

	t.Run("the CRD has both versions and one storage version", func(t *testing.T) {
		var crd apiextensionsv1.CustomResourceDefinition
		data, err := os.ReadFile(crdFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatal(err)
		}
		var versions, storage []string
		for _, v := range crd.Spec.Versions {
			versions = append(versions, v.Name)
			if v.Storage {
				storage = append(storage, v.Name)
			}
			if v.Subresources == nil || v.Subresources.Status == nil || len(v.AdditionalPrinterColumns) == 0 || v.AdditionalPrinterColumns[0].Name != "Ready" {
				t.Errorf("%s: no status subresource or Ready column", v.Name)
			}
		}
		if crd.Name != frigate.CRDName() || strings.Join(versions, ",") != "v1,v2" || strings.Join(storage, ",") != "v1" {
			t.Errorf("CRD %s has versions %v, storage %v; want %s, v1 and v2, storage v1", crd.Name, versions, storage, frigate.CRDName())
		}
	})

	sample := filepath.Join(dir, filepath.FromSlash(frigate.SampleFile()))
	t.Run("the API server takes the CRD and the sample round-trips", func(t *testing.T) {
		e, err := testenv.Start(filepath.Join(dir, filepath.FromSlash(scaffold.CRDDir)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := e.Stop(); err != nil {
				t.Error(err)
			}
		})
		c, err := client.New(e.Config, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		obj := readObject(t, sample)
		obj.SetNamespace("default")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		for _, version := range []string{"v1", "v2"} {
			got := &unstructured.Unstructured{}
			got.SetAPIVersion("ship.example.com/" + version)
			got.SetKind("Frigate")
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
				t.Fatal(err)
			}
			if msg, _, _ := unstructured.NestedString(got.Object, "spec", "message"); msg != scaffold.SampleMessage {
				t.Errorf("read at %s: spec.message = %q, want %q", version, msg, scaffold.SampleMessage)
			}
		}
	})

	sidecarBin := filepath.Join(dir, "bin", "sidecar")
	t.Run("render prints the ConfigMap child with the message", func(t *testing.T) {
		out := polyopIn(t, "render", "--object", sample, "--", sidecarBin)
		for _, want := range []string{"kind: ConfigMap", "name: frigate-sample", "message: " + scaffold.SampleMessage, `status: "True"`, "reason: Reconciled"} {
			if !strings.Contains(out, want) {
				t.Errorf("render printed no %q:\n%s", want, out)
			}
		}
	})

	t.Run("the validation webhook refuses a message of 100 characters", func(t *testing.T) {
		obj := readObject(t, sample)
		if err := unstructured.SetNestedField(obj.Object, strings.Repeat("x", 100), "spec", "message"); err != nil {
			t.Fatal(err)
		}
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		long := filepath.Join(t.TempDir(), "long.yaml")
		if err := os.WriteFile(long, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out := polyopIn(t, "render", "--admission", "create", "--object", long, "--", sidecarBin)
		for _, want := range []string{"allowed: false", "spec.message: Too long: may not be more than 64 characters", "field: spec.message"} {
			if !strings.Contains(out, want) {
				t.Errorf("render printed no %q:\n%s", want, out)
			}
		}
	})
}

// runIn runs a command in dir and returns its output, failing the test with
// the output when it fails.
func runIn(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func readObject(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}
