package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// fieldOwner is the field manager of the tests' server-side applies.
const fieldOwner = client.FieldOwner("polyop-deploy-test")

// applyMode says how an object is sent to the API server.
type applyMode int

const (
	// create for real.
	create applyMode = iota
	// dryRun: validated and admitted, not stored.
	dryRun
)

// defaultMode creates every object but the admission webhook configurations,
// which would send the API server's admission calls for the example's kinds
// to a Service nothing serves in envtest.
func defaultMode(u *unstructured.Unstructured) applyMode {
	switch u.GetKind() {
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		return dryRun
	}
	return create
}

// apply sends objs to the API server with server-side apply, which rejects
// any field the kind's schema does not declare: namespaces and CRDs first
// (waiting for each CRD to be established), then the rest.
func apply(t *testing.T, objs []*unstructured.Unstructured, mode func(*unstructured.Unstructured) applyMode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first := func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition"
	}
	for _, pass := range []bool{true, false} {
		for _, u := range objs {
			if first(u) != pass {
				continue
			}
			if err := applyOne(ctx, u, mode(u)); err != nil {
				t.Errorf("%v", err)
				continue
			}
			if u.GetKind() == "CustomResourceDefinition" && mode(u) == create {
				waitEstablished(t, u.GetName())
			}
		}
	}
}

func applyOne(ctx context.Context, u *unstructured.Unstructured, mode applyMode) error {
	opts := []client.ApplyOption{fieldOwner, client.ForceOwnership}
	if mode == dryRun {
		opts = append(opts, client.DryRunAll)
	}
	u = u.DeepCopy()
	if err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
		how := "applying"
		if mode == dryRun {
			how = "applying (dry run)"
		}
		return fmt.Errorf("%s %s %s/%s: %w", how, u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

func waitEstablished(t *testing.T, name string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "CRD "+name+" established", func(ctx context.Context) error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not established: %v", crd.Status.Conditions)
	})
}

// TestEveryKustomizationAppliesToTheAPIServer renders config/default, every
// overlay, and an overlay turning on every optional component, and applies
// what they render to the API server, which validates each object against
// its schema.
func TestEveryKustomizationAppliesToTheAPIServer(t *testing.T) {
	kustomizations := map[string]func(t *testing.T) []*unstructured.Unstructured{
		"config/default": func(t *testing.T) []*unstructured.Unstructured { return render(t, repo("config", "default")) },
		// Every component at once, on the first overlay's generated
		// manifests, in a namespace of its own.
		"every component": func(t *testing.T) []*unstructured.Unstructured {
			o := overlays(t)[0]
			return composed(t, map[string]any{
				"namespace":    "every-component",
				"namePrefix":   "every-",
				"resources":    []string{"config/default", "config/overlays/" + o.example + "/generated"},
				"components":   []string{"config/overlays/" + o.example + "/sidecar", "config/webhook", "config/certmanager", "config/prometheus", "config/prometheus-rules", "config/grafana", "config/network-policy"},
				"transformers": []string{"config/certmanager/inject-ca"},
			})
		},
	}
	for _, o := range overlays(t) {
		kustomizations["config/overlays/"+o.name] = func(t *testing.T) []*unstructured.Unstructured { return render(t, o.dir) }
	}
	for name, objs := range kustomizations {
		t.Run(name, func(t *testing.T) {
			rendered := objs(t)
			apply(t, rendered, defaultMode)
			kinds := map[string]bool{}
			for _, u := range rendered {
				kinds[u.GetKind()] = true
			}
			if name == "every component" {
				for _, k := range []string{"ServiceMonitor", "PrometheusRule", "ConfigMap", "NetworkPolicy", "Certificate", "Issuer", "ValidatingWebhookConfiguration", "Deployment"} {
					mustf(t, kinds[k], "no %s rendered", k)
				}
			}
		})
	}
}

// TestApplyRejectsWhatTheSchemaDoesNotDeclare shows that applying validates
// the manifests: an object with a misspelt field is rejected, for a built-in
// kind and for a kind of testdata/crds.
func TestApplyRejectsWhatTheSchemaDoesNotDeclare(t *testing.T) {
	t.Parallel()
	for name, manifest := range map[string]string{
		"a Deployment with a misspelt field": `
apiVersion: apps/v1
kind: Deployment
metadata: {name: misspelt, namespace: default}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
      - name: c
        image: x
        readinesProbe: {exec: {command: [x]}}
`,
		"a Certificate with a misspelt field": `
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: misspelt, namespace: default}
spec:
  secretName: s
  issuerRef: {name: i}
  dnsName: [a.example.com]
`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			objs, err := decode([]byte(manifest))
			if err != nil {
				t.Fatal(err)
			}
			err = applyOne(context.Background(), objs[0], dryRun)
			if err == nil || !strings.Contains(err.Error(), "field not declared in schema") && !strings.Contains(err.Error(), "unknown field") {
				t.Fatalf("applying = %v, want the unknown field rejected", err)
			}
			t.Log(err)
		})
	}
}
