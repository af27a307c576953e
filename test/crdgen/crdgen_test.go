package crdgen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/polyop/polyop/internal/testenv"
)

var widgetGVK = schema.GroupVersionKind{Group: "crdgen.polyop.dev", Version: "v1", Kind: "Widget"}

// polyopCRD builds the TypeScript SDK (tsc -b) and runs its polyop-crd
// command with node on module, writing into a temporary directory it returns.
func polyopCRD(t *testing.T, module string) (dir string, output string, err error) {
	t.Helper()
	buildErr := testenv.BuildTypeScript(filepath.Join("sdk", "typescript"))
	if errors.Is(buildErr, testenv.ErrNoNode) {
		t.Fatalf("cannot run the TypeScript SDK (run make node_modules, or make test): %v", buildErr)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	dir = t.TempDir()
	root := testenv.RepoRoot()
	cmd := exec.Command("node", filepath.Join(root, "sdk", "typescript", "dist", "crd-cli.js"),
		filepath.Join(root, "test", "crdgen", "testdata", module), "-o", dir)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	return dir, string(out), err
}

// installWidgetCRDs writes the CRDs of testdata/widget.mjs and installs them,
// once for the package's tests; envtest waits until they are served.
func installWidgetCRDs(t *testing.T) {
	t.Helper()
	dir, out, err := polyopCRD(t, "widget.mjs")
	if err != nil {
		t.Fatalf("polyop-crd widget.mjs: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) != 2 {
		t.Fatalf("polyop-crd wrote %v, want one file for Widget and one for Gadget\n%s", files, out)
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{dir}, MaxTime: 3 * time.Minute}); err != nil {
		t.Fatalf("the API server refused the CRDs polyop-crd wrote: %v", err)
	}
}

func widget(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace("default")
	u.SetName(name)
	return u
}

func TestGeneratedCRDsAreServedAndEnforceTheirSchema(t *testing.T) {
	installWidgetCRDs(t)
	ctx := context.Background()

	t.Run("the CRD has both versions, v1 stored, and the kind's names", func(t *testing.T) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := k8s.Get(ctx, client.ObjectKey{Name: "widgets.crdgen.polyop.dev"}, &crd); err != nil {
			t.Fatal(err)
		}
		var versions []string
		for _, v := range crd.Spec.Versions {
			versions = append(versions, fmt.Sprintf("%s served=%t storage=%t deprecated=%t", v.Name, v.Served, v.Storage, v.Deprecated))
		}
		if got, want := strings.Join(versions, "; "), "v1 served=true storage=true deprecated=false; v1alpha1 served=true storage=false deprecated=true"; got != want {
			t.Errorf("versions: got %q, want %q", got, want)
		}
		if got := fmt.Sprintf("%v %v %s", crd.Spec.Names.ShortNames, crd.Spec.Names.Categories, crd.Spec.Scope); got != "[wdg] [polyop] Namespaced" {
			t.Errorf("short names, categories, scope: got %s", got)
		}
		var gadgets apiextensionsv1.CustomResourceDefinition
		if err := k8s.Get(ctx, client.ObjectKey{Name: "gadgets.crdgen.polyop.dev"}, &gadgets); err != nil {
			t.Fatal(err)
		}
		if gadgets.Spec.Scope != apiextensionsv1.ClusterScoped {
			t.Errorf("Gadget's scope: got %s, want Cluster", gadgets.Spec.Scope)
		}
	})

	t.Run("a valid widget is stored with its defaults, unknown fields pruned where not preserved", func(t *testing.T) {
		w := widget("valid", map[string]any{
			"color":          "red",
			"ratio":          0.5,
			"step":           10,
			"owner":          "alice",
			"contact":        "alice@example.com",
			"since":          "2026-01-02T03:04:05Z",
			"size":           int64(1) << 40,
			"tags":           []any{"a", "b"},
			"ports":          []any{map[string]any{"name": "http", "port": 80}},
			"labels":         map[string]any{"app": "w"},
			"extra":          map[string]any{"kept": true},
			"anything":       []any{1, "two"},
			"template":       map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "t"}, "data": map[string]any{"k": "v"}},
			"maxUnavailable": "25%",
			"note":           nil,
			"min":            1,
			"max":            2,
			"pruned":         "gone",
		})
		if err := k8s.Create(ctx, w); err != nil {
			t.Fatalf("creating a valid Widget: %v", err)
		}
		got := widget("valid", nil)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
			t.Fatal(err)
		}
		spec, _, _ := unstructured.NestedMap(got.Object, "spec")
		if spec["replicas"] != int64(1) || spec["mode"] != "safe" {
			t.Errorf("defaults: got replicas=%v mode=%v, want 1 and safe", spec["replicas"], spec["mode"])
		}
		if _, ok := spec["pruned"]; ok {
			t.Errorf("spec.pruned was kept; an unknown field must be pruned")
		}
		if kept, _, _ := unstructured.NestedBool(spec, "extra", "kept"); !kept {
			t.Errorf("spec.extra.kept was pruned; preserve-unknown-fields must keep it: %v", spec["extra"])
		}
		if data, _, _ := unstructured.NestedString(spec, "template", "data", "k"); data != "v" {
			t.Errorf("spec.template (an embedded resource) lost its data: %v", spec["template"])
		}
	})

	t.Run("a cluster-scoped gadget without a spec is stored with the defaults of none", func(t *testing.T) {
		g := &unstructured.Unstructured{}
		g.SetGroupVersionKind(schema.GroupVersionKind{Group: "crdgen.polyop.dev", Version: "v1", Kind: "Gadget"})
		g.SetName("gadget")
		if err := k8s.Create(ctx, g); err != nil {
			t.Fatalf("creating a Gadget without a spec (its spec is optional): %v", err)
		}
	})

	refused := map[string]struct {
		name  string
		spec  map[string]any
		field string
	}{
		"if replicas is above the maximum, then spec.replicas is named":        {spec: map[string]any{"replicas": 11}, field: "spec.replicas"},
		"if the color is not one of the enum, then spec.color is named":        {spec: map[string]any{"color": "green"}, field: "spec.color"},
		"if the ratio reaches the exclusive maximum, then spec.ratio is named": {spec: map[string]any{"ratio": 1}, field: "spec.ratio"},
		"if the step is not a multiple of 5, then spec.step is named":          {spec: map[string]any{"step": 7}, field: "spec.step"},
		"if the owner breaks the pattern, then spec.owner is named":            {spec: map[string]any{"owner": "Alice"}, field: "spec.owner"},
		"if the owner is too long, then spec.owner is named":                   {spec: map[string]any{"owner": strings.Repeat("a", 21)}, field: "spec.owner"},
		"if the contact is not an email, then spec.contact is named":           {spec: map[string]any{"contact": "alice"}, field: "spec.contact"},
		"if since is not a date-time, then spec.since is named":                {spec: map[string]any{"since": "yesterday"}, field: "spec.since"},
		"if a set has a duplicate, then spec.tags is named":                    {spec: map[string]any{"tags": []any{"a", "a"}}, field: "spec.tags"},
		"if a set has too many items, then spec.tags is named":                 {spec: map[string]any{"tags": []any{"a", "b", "c", "d"}}, field: "spec.tags"},
		"if a map list has a duplicate key, then spec.ports is named":          {spec: map[string]any{"ports": []any{map[string]any{"name": "a", "port": 1}, map[string]any{"name": "a", "port": 2}}}, field: "spec.ports"},
		"if a map list item lacks its key, then spec.ports is named":           {spec: map[string]any{"ports": []any{map[string]any{"port": 1}}}, field: "spec.ports[0].name"},
		"if a map's value has the wrong type, then spec.labels is named":       {spec: map[string]any{"labels": map[string]any{"a": 1}}, field: "spec.labels.a"},
		"if an int-or-string is a boolean, then spec.maxUnavailable is named":  {spec: map[string]any{"maxUnavailable": true}, field: "spec.maxUnavailable"},
		"if an embedded resource has no kind, then spec.template is named":     {spec: map[string]any{"template": map[string]any{"apiVersion": "v1"}}, field: "spec.template"},
		"if the CEL rule fails, then its message is shown":                     {spec: map[string]any{"min": 3, "max": 2}, field: "min must not exceed max"},
		"if the name is longer than the metadata constraint, then it is named": {name: strings.Repeat("w", 31), spec: map[string]any{}, field: "metadata.name"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			objName := tc.name
			if objName == "" {
				objName = "invalid"
			}
			err := k8s.Create(ctx, widget(objName, tc.spec))
			if !apierrors.IsInvalid(err) {
				t.Fatalf("creating an invalid Widget: got %v, want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("the error does not name %q: %v", tc.field, err)
			}
		})
	}

	t.Run("the spec is required", func(t *testing.T) {
		w := widget("nospec", nil)
		delete(w.Object, "spec")
		err := k8s.Create(ctx, w)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec: Required value") {
			t.Fatalf("creating a Widget without a spec: got %v, want spec: Required value", err)
		}
	})

	t.Run("the scale subresource reads spec.replicas", func(t *testing.T) {
		scale := &unstructured.Unstructured{}
		scale.SetGroupVersionKind(autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
		if err := k8s.SubResource("scale").Get(ctx, widget("valid", nil), scale); err != nil {
			t.Fatal(err)
		}
		if replicas, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas"); replicas != 1 {
			t.Errorf("scale.spec.replicas: got %d, want 1", replicas)
		}
	})

	t.Run("kubectl knows the short name and prints the columns", func(t *testing.T) {
		cmd := exec.Command(env.Kubectl, "--kubeconfig", env.Kubeconfig, "get", "wdg", "-n", "default", "-o", "wide")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl get wdg: %v\n%s", err, out)
		}
		header := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
		if got := strings.Join(header, " "); got != "NAME REPLICAS COLOR AGE" {
			t.Errorf("kubectl get wdg -o wide header: got %q, want NAME REPLICAS COLOR AGE\n%s", got, out)
		}
	})
}

func TestASchemaTheAPIServerWouldRefuseNamesTheField(t *testing.T) {
	_, out, err := polyopCRD(t, "broken.mjs")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("polyop-crd broken.mjs: got %v, want exit status 1\n%s", err, out)
	}
	want := "polyop: Broken.crdgen.polyop.dev/v1: spec.items[*].value: a union of Type.String and Type.Object is not a structural schema"
	if !strings.Contains(out, want) {
		t.Errorf("polyop-crd broken.mjs printed\n%s\nwant it to contain\n%s", out, want)
	}
}
