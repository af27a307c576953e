package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/polyop/polyop/internal/testenv"
)

// repo is a path in the repository.
func repo(elem ...string) string {
	return filepath.Join(append([]string{testenv.RepoRoot()}, elem...)...)
}

// overlay is a deployable kustomization of config/overlays: an example's
// variant, such as go-maintenancewindow/certmanager.
type overlay struct {
	// name is the path below config/overlays, as make deploy's OVERLAY.
	name string
	// example is the example it deploys, the first element of name.
	example string
	dir     string
}

// overlays lists config/overlays/<example>/<variant>: every kustomization
// there but the generated folders and the components.
func overlays(t *testing.T) []overlay {
	t.Helper()
	files, err := filepath.Glob(repo("config", "overlays", "*", "*", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []overlay
	for _, f := range files {
		dir := filepath.Dir(f)
		if filepath.Base(dir) == "generated" {
			continue
		}
		if isComponent(t, f) {
			continue
		}
		name, _ := filepath.Rel(repo("config", "overlays"), dir)
		out = append(out, overlay{name: filepath.ToSlash(name), example: filepath.Base(filepath.Dir(dir)), dir: dir})
	}
	if len(out) == 0 {
		t.Fatal("no overlays in config/overlays")
	}
	return out
}

func isComponent(t *testing.T, kustomization string) bool {
	t.Helper()
	data, err := os.ReadFile(kustomization)
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("%s: %v", kustomization, err)
	}
	return k.Kind == "Component"
}

// render runs kubectl's kustomize on dir and decodes what it prints.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	cmd := exec.Command(env.Kubectl, "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	objs, err := decode(out)
	if err != nil {
		t.Fatalf("kubectl kustomize %s printed something that is not YAML objects: %v", dir, err)
	}
	if len(objs) == 0 {
		t.Fatalf("kubectl kustomize %s rendered nothing", dir)
	}
	return objs
}

func decode(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// composed writes a kustomization into a fresh folder and renders it. Its
// paths are relative to the repository root; composed makes them relative to
// the folder, which kustomize requires.
func composed(t *testing.T, kustomization map[string]any) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, repo(p))
		if err != nil {
			t.Fatal(err)
		}
		return filepath.ToSlash(r)
	}
	for _, field := range []string{"resources", "components", "transformers"} {
		if paths, ok := kustomization[field].([]string); ok {
			relPaths := make([]string, len(paths))
			for i, p := range paths {
				relPaths[i] = rel(p)
			}
			kustomization[field] = relPaths
		}
	}
	data, err := yaml.Marshal(kustomization)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return render(t, dir)
}

// find returns the objects of a kind.
func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// typed converts an object to its Go type.
func typed[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// deployment returns the one Deployment of objs.
func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	ds := find(objs, "Deployment")
	if len(ds) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(ds))
	}
	return typed[appsv1.Deployment](t, ds[0])
}

// container returns the container (or init container) of the pod named name.
func container(t *testing.T, pod *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for _, cs := range [][]corev1.Container{pod.Containers, pod.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	t.Fatalf("the pod has no container %q", name)
	return nil
}

// flagValue returns the value of --name=value in args, and whether it is
// there; a bare --name counts as "true".
func flagValue(args []string, name string) (string, bool) {
	var value string
	found := false
	for _, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if k, v, ok := strings.Cut(a, "="); ok && k == name {
			value, found = v, true
		} else if a == name {
			value, found = "true", true
		}
	}
	return value, found
}

// envValue returns the value of an environment variable of c.
func envValue(c *corev1.Container, name string) (string, bool) {
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return "", false
	}
	return c.Env[i].Value, true
}
