package index

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyop/polyop/internal/object"
)

const pod = `{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {
    "name": "web-1", "namespace": "shop",
    "labels": {"app.kubernetes.io/name": "web"},
    "ownerReferences": [
      {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "u1", "controller": true},
      {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings", "uid": "u2"}
    ]
  },
  "spec": {
    "nodeName": "node-a",
    "priority": 7,
    "hostNetwork": false,
    "containers": [
      {"name": "app", "image": "web:1", "ports": [{"containerPort": 8080}]},
      {"name": "proxy", "image": "envoy:2"},
      {"name": "again", "image": "web:1"}
    ],
    "tolerations": ["a", "", "b", "a"]
  }
}`

func content(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(pod), &m); err != nil {
		t.Fatal(err)
	}
	// As unstructured JSON decodes them: whole numbers are int64.
	m["spec"].(map[string]any)["priority"] = int64(7)
	m["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["ports"].([]any)[0].(map[string]any)["containerPort"] = int64(8080)
	return m
}

func TestFieldPath(t *testing.T) {
	tests := map[string]struct {
		path string
		want []string
	}{
		"a field, then a field":                        {".spec.nodeName", []string{"node-a"}},
		"without the leading dot":                      {"spec.nodeName", []string{"node-a"}},
		"a number is its decimal text":                 {".spec.priority", []string{"7"}},
		"a boolean is true or false":                   {".spec.hostNetwork", []string{"false"}},
		"a quoted name with dots and slashes":          {".metadata.labels['app.kubernetes.io/name']", []string{"web"}},
		"a double-quoted name":                         {`.metadata.labels["app.kubernetes.io/name"]`, []string{"web"}},
		"every item of a list, without duplicates":     {".spec.containers[*].image", []string{"web:1", "envoy:2"}},
		"one item of a list":                           {".spec.containers[1].name", []string{"proxy"}},
		"an item past the end gives none":              {".spec.containers[9].name", nil},
		"a list of strings gives each, once, no empty": {".spec.tolerations", []string{"a", "b"}},
		"a filter on a boolean":                        {".metadata.ownerReferences[?(@.controller==true)].name", []string{"web-abc"}},
		"a filter on a quoted string":                  {".metadata.ownerReferences[?(@.kind=='ConfigMap')].uid", []string{"u2"}},
		"a filter on a double-quoted string":           {`.metadata.ownerReferences[?(@.kind=="ReplicaSet")].name`, []string{"web-abc"}},
		"a filter on a number, through a nested path":  {".spec.containers[?(@.name=='app')].ports[?(@.containerPort==8080)].containerPort", []string{"8080"}},
		"a filter matching nothing gives none":         {".metadata.ownerReferences[?(@.kind=='Job')].name", nil},
		"a missing field gives none":                   {".spec.missing.deeper", nil},
		"a map gives none":                             {".metadata.labels", nil},
		"a field of a scalar gives none":               {".spec.nodeName.x", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e, err := FieldPath(tc.path)
			if err != nil {
				t.Fatalf("FieldPath(%q): %v", tc.path, err)
			}
			got, err := e.Values(content(t))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: got %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

func TestFieldPathRefused(t *testing.T) {
	tests := map[string]struct{ path, says string }{
		"empty":                      {"", "empty"},
		"a trailing dot":             {".spec.", "ends with a dot"},
		"a double dot":               {".spec..x", "not a field name"},
		"a name that needs quoting":  {".metadata.labels.app.kubernetes.io/name", "quote a name with dots or slashes as ['name']"},
		"an unterminated bracket":    {".spec.containers[*", "unterminated ["},
		"an unterminated quote":      {".metadata.labels['a", "unterminated"},
		"an operator other than ==":  {".a[?(@.b!=1)]", "only =="},
		"an unquoted string literal": {".a[?(@.b==web)]", "not a literal"},
		"a negative index":           {".a[-1]", "not [*], [N]"},
		"an unterminated filter":     {".a[?(@.b==1]", "unterminated filter"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := FieldPath(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("FieldPath(%q) = %v, want an error saying %q", tc.path, err, tc.says)
			}
		})
	}
}

func TestCEL(t *testing.T) {
	tests := map[string]struct {
		expr string
		want []string
	}{
		"a string":                     {"object.spec.nodeName", []string{"node-a"}},
		"a list of strings, once each": {"object.spec.containers.map(c, c.image)", []string{"web:1", "envoy:2"}},
		"the controller's name": {
			"object.metadata.ownerReferences.filter(r, has(r.controller) && r.controller).map(r, r.name)", []string{"web-abc"}},
		"an empty list gives none": {"object.metadata.ownerReferences.filter(r, r.kind == 'Job').map(r, r.name)", nil},
		"null gives none":          {"object.spec.?missing.orValue(null)", nil},
		"a conditional": {
			"has(object.spec.nodeName) ? object.spec.nodeName : ''", []string{"node-a"}},
		"a string function": {"object.metadata.name.upperAscii()", []string{"WEB-1"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e, err := CEL(tc.expr, 0)
			if err != nil {
				t.Fatalf("CEL(%q): %v", tc.expr, err)
			}
			got, err := e.Values(content(t))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: got %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}

func TestCELRefusedAtCompile(t *testing.T) {
	tests := map[string]struct{ expr, says string }{
		"a syntax error":      {"object.spec.(", "Syntax error"},
		"an unknown variable": {"pod.spec.nodeName", "undeclared reference to 'pod'"},
		"a number":            {"1 + 2", "returns int, not a string or a list of strings"},
		"a list of numbers":   {"[1, 2]", "returns list(int)"},
		"a boolean":           {"has(object.spec)", "returns bool"},
		"an unknown function": {"object.spec.nodeName.frobnicate()", "undeclared reference to 'frobnicate'"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := CEL(tc.expr, 0)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("CEL(%q) = %v, want an error saying %q", tc.expr, err, tc.says)
			}
		})
	}
}

func TestCELErrorsAtEvaluation(t *testing.T) {
	tests := map[string]struct {
		expr      string
		costLimit uint64
		says      string
	}{
		"a missing field":             {"object.spec.missing", 0, "no such key: missing"},
		"a dyn that is a number":      {"object.spec.priority", 0, "returned int"},
		"a list holding a non-string": {"object.spec.containers", 0, "not only strings"},
		"over the cost limit": {
			"object.spec.containers.map(a, object.spec.containers.map(b, a.name + b.name)).map(l, l[0])", 5, "cost limit exceeded"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e, err := CEL(tc.expr, tc.costLimit)
			if err != nil {
				t.Fatalf("CEL(%q): %v", tc.expr, err)
			}
			_, err = e.Values(content(t))
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Values of %q = %v, want an error saying %q", tc.expr, err, tc.says)
			}
		})
	}
}

// An object an expression fails on is logged, with the index and the object,
// and indexed under no value; the cache goes on.
func TestIndexerFuncLogsAndIndexesNothingOnError(t *testing.T) {
	e, err := CEL("object.spec.missing", 0)
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	obj := object.New(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	if err := obj.UnmarshalJSON([]byte(pod)); err != nil {
		t.Fatal(err)
	}
	if got := IndexerFunc("Pod", "spec.missing", e, log)(obj); got != nil {
		t.Errorf("values = %q, want none", got)
	}
	if len(logged) != 1 {
		t.Fatalf("logged %d lines, want 1: %q", len(logged), logged)
	}
	for _, want := range []string{`"index"="spec.missing"`, `"kind"="Pod"`, `"namespace"="shop"`, `"name"="web-1"`, "no such key"} {
		if !strings.Contains(logged[0], want) {
			t.Errorf("log %s does not say %s", logged[0], want)
		}
	}

	path, err := FieldPath(".metadata.ownerReferences[?(@.controller==true)].name")
	if err != nil {
		t.Fatal(err)
	}
	if got := IndexerFunc("Pod", ".metadata.controller", path, log)(obj); !reflect.DeepEqual(got, []string{"web-abc"}) {
		t.Errorf("values of a cached object = %q, want [web-abc]", got)
	}
	// A path outside metadata decodes only its top-level field.
	for p, want := range map[string][]string{".spec.containers[*].name": {"app", "proxy", "again"}, "kind": {"Pod"}, ".status.phase": nil} {
		e, err := FieldPath(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := IndexerFunc("Pod", p, e, log)(obj); !reflect.DeepEqual(got, want) {
			t.Errorf("%s of a cached object = %q, want %q", p, got, want)
		}
	}
	if len(logged) != 1 {
		t.Errorf("logged %q after the first line, want nothing more", logged[1:])
	}
}
