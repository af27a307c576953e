package crdgen

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/polyop/polyop/internal/testenv"
)

// pythonTimeout bounds one run of the virtualenv's Python: an import of
// pydantic and a model or two takes about a second.
const pythonTimeout = 2 * time.Minute

var gadgetV1 = schema.GroupVersionKind{Group: "python.crdgen.polyop.dev", Version: "v1", Kind: "Gadget"}

// python returns the virtualenv's interpreter with the polyop SDK, or fails
// the test saying how to make it.
func python(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(testenv.RepoRoot(), ".venv", "bin", "python")
	if out, err := exec.Command(bin, "-c", "import polyop.crd").CombinedOutput(); err != nil {
		t.Fatalf("no Python virtualenv with the polyop SDK (run make .venv, or make test): %v\n%s", err, out)
	}
	return bin
}

// runPython runs the interpreter in testdata/python and returns its standard output.
func runPython(t *testing.T, py string, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pythonTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Dir = filepath.Join("testdata", "python")
	cmd.Stdin = strings.NewReader(string(stdin))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", py, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// warnings collects the API server's warnings.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

func TestPythonCRDsAreAcceptedAndEnforcedByTheAPIServer(t *testing.T) {
	py := python(t)
	ctx := context.Background()

	out := t.TempDir()
	runPython(t, py, nil, "-m", "polyop.crd", "gadgets", "-o", out)
	files, err := filepath.Glob(filepath.Join(out, "*.yaml"))
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != "python.crdgen.polyop.dev_gadgets.yaml" {
		t.Fatalf("python -m polyop.crd wrote %v (%v), want python.crdgen.polyop.dev_gadgets.yaml", files, err)
	}

	warned := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warned
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{out}, ErrorIfPathMissing: true})
	if err != nil {
		t.Fatalf("installing the generated CRD: %v", err)
	}
	t.Cleanup(func() {
		if err := envtest.UninstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
			t.Errorf("uninstalling the generated CRD: %v", err)
		}
	})
	if w := warned.all(); len(w) > 0 {
		t.Errorf("the API server warned about the generated CRD: %q", w)
	}
	warnedClient, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a sample is stored with its defaults, and preserved and embedded fields kept", func(t *testing.T) {
		gadget := sample("defaults")
		if err := k8s.Create(ctx, gadget); err != nil {
			t.Fatalf("creating a valid Gadget: %v", err)
		}
		for path, want := range map[string]any{
			"spec.replicas":               int64(1),
			"spec.tier":                   "Silver",
			"spec.mode":                   "Safe",
			"spec.maxSurge":               int64(1),
			"spec.ports[0].protocol":      "TCP",
			"spec.template.kind":          "ConfigMap",
			"spec.extra.anything.nested":  true,
			"spec.limits.max":             int64(2),
			"spec.template.metadata.name": "embedded",
			"spec.serial":                 "6f1c1c5e-6b2a-4c41-9d1e-5f0c1b7a2d3e",
			"spec.start":                  "2026-12-01T10:00:00Z",
			"spec.ratio":                  0.5,
		} {
			if got := field(gadget.Object, path); got != want {
				t.Errorf("%s = %#v, want %#v", path, got, want)
			}
		}
	})

	t.Run("the model reads the stored object, and its status is written through the status and read through the scale subresource", func(t *testing.T) {
		gadget := sample("status")
		if err := k8s.Create(ctx, gadget); err != nil {
			t.Fatalf("creating a valid Gadget: %v", err)
		}
		stored, err := json.Marshal(gadget.Object)
		if err != nil {
			t.Fatal(err)
		}
		const script = `
import json, sys
from gadgets import Gadget
gadget = Gadget.parse(json.load(sys.stdin))
assert gadget.spec.ports[0].name == "http" and gadget.spec.max_surge == 1, gadget.spec
gadget.status.replicas = gadget.spec.replicas
gadget.status.selector = "app=gadget"
gadget.status.observed_generation = gadget.metadata.generation
gadget.status.set_condition("Ready", True, "Running", "one replica", observed_generation=gadget.metadata.generation or 0)
json.dump(gadget.to_dict(), sys.stdout)
`
		var updated unstructured.Unstructured
		if err := json.Unmarshal(runPython(t, py, stored, "-c", script), &updated.Object); err != nil {
			t.Fatalf("the model's JSON: %v", err)
		}
		if err := k8s.Status().Update(ctx, &updated); err != nil {
			t.Fatalf("writing the model's status: %v", err)
		}
		scale := &unstructured.Unstructured{}
		scale.SetGroupVersionKind(autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
		if err := k8s.SubResource("scale").Get(ctx, &updated, scale); err != nil {
			t.Fatalf("reading the scale subresource: %v", err)
		}
		for path, want := range map[string]any{"spec.replicas": int64(1), "status.replicas": int64(1), "status.selector": "app=gadget"} {
			if got := field(scale.Object, path); got != want {
				t.Errorf("scale %s = %#v, want %#v", path, got, want)
			}
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(gadgetV1)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(gadget), got); err != nil {
			t.Fatal(err)
		}
		if status := field(got.Object, "status.conditions[0].status"); status != "True" {
			t.Errorf("status.conditions[0].status = %#v, want True; status: %v", status, got.Object["status"])
		}
	})

	t.Run("the deprecated version is served with its warning", func(t *testing.T) {
		gadget := sample("old")
		if err := k8s.Create(ctx, gadget); err != nil {
			t.Fatalf("creating a valid Gadget: %v", err)
		}
		old := &unstructured.Unstructured{}
		old.SetGroupVersionKind(schema.GroupVersionKind{Group: "python.crdgen.polyop.dev", Version: "v1alpha1", Kind: "Gadget"})
		if err := warnedClient.Get(ctx, client.ObjectKeyFromObject(gadget), old); err != nil {
			t.Fatalf("reading the Gadget at v1alpha1: %v", err)
		}
		if w := strings.Join(warned.all(), "\n"); !strings.Contains(w, "python.crdgen.polyop.dev/v1alpha1 Gadget is deprecated; use v1") {
			t.Errorf("warnings %q, want the deprecation warning", w)
		}
	})

	for sentence, tc := range map[string]struct {
		change func(spec map[string]any)
		field  string
	}{
		"a value above the maximum is refused":       {func(s map[string]any) { s["replicas"] = 11 }, "spec.replicas"},
		"a value at an exclusive maximum is refused": {func(s map[string]any) { s["ratio"] = 1 }, "spec.ratio"},
		"a value not a multiple is refused":          {func(s map[string]any) { s["step"] = 7 }, "spec.step"},
		"a string that does not match the pattern":   {func(s map[string]any) { s["image"] = "UPPER CASE" }, "spec.image"},
		"a missing required field is refused":        {func(s map[string]any) { delete(s, "image") }, "spec.image"},
		"a value outside an Enum is refused":         {func(s map[string]any) { s["tier"] = "Bronze" }, "spec.tier"},
		"a value outside a Literal is refused":       {func(s map[string]any) { s["mode"] = "Slow" }, "spec.mode"},
		"a port of a list map's item out of range":   {func(s map[string]any) { s["ports"] = []any{map[string]any{"name": "http", "port": 0}} }, "spec.ports[0].port"},
		"two items of a list map with one key are refused": {func(s map[string]any) {
			s["ports"] = []any{map[string]any{"name": "a", "port": 1}, map[string]any{"name": "a", "port": 2}}
		}, "spec.ports[1]"},
		"a set with a value twice is refused":              {func(s map[string]any) { s["tags"] = []any{"x", "x"} }, "spec.tags[1]"},
		"too many items are refused":                       {func(s map[string]any) { s["tags"] = []any{"a", "b", "c", "d", "e"} }, "spec.tags"},
		"a boolean where an int or string goes is refused": {func(s map[string]any) { s["maxSurge"] = true }, "spec.maxSurge"},
		"a CEL rule that does not hold refuses the object": {func(s map[string]any) { s["limits"] = map[string]any{"min": 5, "max": 1} }, "min must not exceed max"},
		"an embedded resource without a kind is refused":   {func(s map[string]any) { s["template"] = map[string]any{"apiVersion": "v1"} }, "spec.template.kind"},
		"a string where an integer goes is refused":        {func(s map[string]any) { s["size"] = "big" }, "spec.size"},
		"a date-time that is not one is refused":           {func(s map[string]any) { s["start"] = "yesterday" }, "spec.start"},
	} {
		t.Run(sentence, func(t *testing.T) {
			gadget := sample("invalid")
			tc.change(gadget.Object["spec"].(map[string]any))
			err := k8s.Create(ctx, gadget)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("creating %v: got %v, want Invalid", gadget.Object["spec"], err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("the error does not name %s: %v", tc.field, err)
			}
		})
	}
}

// sample returns a valid Gadget named name in the default namespace.
func sample(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"image":    "registry.example.com/gadget:1.0",
			"ports":    []any{map[string]any{"name": "http", "port": 8080}},
			"tags":     []any{"a", "b"},
			"maxSurge": 1,
			"template": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "embedded"}},
			"extra":    map[string]any{"anything": map[string]any{"nested": true}},
			"start":    "2026-12-01T10:00:00Z",
			"serial":   "6f1c1c5e-6b2a-4c41-9d1e-5f0c1b7a2d3e",
			"limits":   map[string]any{"min": 1, "max": 2},
		},
	}}
	u.SetGroupVersionKind(gadgetV1)
	u.SetNamespace("default")
	u.SetGenerateName(name + "-")
	return u
}

// field reads a path such as spec.ports[0].protocol from an object.
func field(obj map[string]any, path string) any {
	var value any = obj
	for _, part := range strings.Split(path, ".") {
		name, index, indexed := strings.Cut(strings.TrimSuffix(part, "]"), "[")
		m, ok := value.(map[string]any)
		if !ok {
			return nil
		}
		value = m[name]
		if indexed {
			list, ok := value.([]any)
			if !ok || index != "0" || len(list) == 0 {
				return nil
			}
			value = list[0]
		}
	}
	return value
}
