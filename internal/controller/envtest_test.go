package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/testenv"
)

// The tests and benchmarks in the files named envtest run against a real
// kube-apiserver and etcd, started once for the package when the first of
// them needs it.

var shared = testenv.Lazy{Setup: func(e *testenv.Env) error { return installGadgets(e.Config) }}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// gadgetGVK is the reconciled kind of the envtest tests: a CRD with a status
// subresource whose schema knows only status.phase, so that the API server
// drops any other status field it is sent.
var gadgetGVK = schema.GroupVersionKind{Group: "envtest.polyop.dev", Version: "v1", Kind: "Gadget"}

// controlPlane returns the shared API server, with the Gadget CRD served.
func controlPlane(tb testing.TB) *testenv.Env {
	tb.Helper()
	return shared.Get(tb)
}

func installGadgets(cfg *rest.Config) error {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.envtest.polyop.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gadgetGVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   obj(map[string]apiextensionsv1.JSONSchemaProps{"value": {Type: "string"}}),
						"status": obj(map[string]apiextensionsv1.JSONSchemaProps{"phase": {Type: "string"}}),
					},
				}},
			}},
		},
	}
	ctx := context.Background()
	if err := c.Create(ctx, crd); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the Gadget CRD is not established after a minute")
}

// requestCounter counts the requests that go through it, by method.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	next   http.RoundTripper
}

func (c *requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.counts[req.Method]++
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

// take returns the counts since the last take, as "PATCH=1 ..." ("" for
// none).
func (c *requestCounter) take() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if n := c.counts[m]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", m, n))
		}
	}
	c.counts = map[string]int{}
	return strings.Join(parts, " ")
}

// envScheme knows every kind as object.Object, as the host's does.
func envScheme(kinds ...schema.GroupVersionKind) *runtime.Scheme {
	scheme := runtime.NewScheme()
	object.AddToScheme(scheme, kinds...)
	return scheme
}

// countingClient is a client of the shared API server whose requests are
// counted, reading through reader when it is not nil (the host's cache).
// Discovery goes around the counter.
func countingClient(tb testing.TB, scheme *runtime.Scheme, reader client.Reader) (client.Client, *requestCounter) {
	tb.Helper()
	e := controlPlane(tb)
	plain, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		tb.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(e.Config, plain)
	if err != nil {
		tb.Fatal(err)
	}
	counter := &requestCounter{counts: map[string]int{}}
	cfg := rest.CopyConfig(e.Config)
	// object.Object travels as JSON, as the host's client sends it.
	cfg.ContentType = "application/json"
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	opts := client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: hc}
	if reader != nil {
		opts.Cache = &client.CacheOptions{Reader: reader}
	}
	c, err := client.New(cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return c, counter
}

// plainClient is an uncounted client of the shared API server, with
// client-go's scheme.
func plainClient(tb testing.TB) client.Client {
	tb.Helper()
	c, err := client.New(controlPlane(tb).Config, client.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// testNamespace makes a namespace of its own for a test.
func testNamespace(tb testing.TB) string {
	tb.Helper()
	c := plainClient(tb)
	ns := fmt.Sprintf("ctl-%d", time.Now().UnixNano())
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		tb.Fatal(err)
	}
	return ns
}

func jsonUnmarshal(raw []byte, v any) error { return json.Unmarshal(raw, v) }

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}
