package object_test

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/polyop/polyop/internal/object"
)

var (
	widgetGVK    = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

const widgetJSON = `{"apiVersion":"example.com/v1","kind":"Widget",` +
	`"metadata":{"name":"w","namespace":"ns","uid":"u-1","resourceVersion":"7","generation":2,"labels":{"app":"web"},` +
	`"managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"example.com/v1"}]},` +
	`"spec":{"size":3,"ratio":0.5,"tags":["a","b"],"text":"q\"uote\\ {not a brace}"},"status":{"ready":true}}`

func decode(t *testing.T, gvk schema.GroupVersionKind, data string) *object.Object {
	t.Helper()
	o := object.New(gvk)
	if err := json.Unmarshal([]byte(data), o); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestDecodeKeepsMetadataTypedAndTheRestAsJSON(t *testing.T) {
	t.Parallel()
	o := decode(t, widgetGVK, widgetJSON)
	if o.GetName() != "w" || o.GetNamespace() != "ns" || o.GetUID() != "u-1" || o.GetResourceVersion() != "7" || o.GetGeneration() != 2 || o.GetLabels()["app"] != "web" {
		t.Errorf("metadata %+v", o.ObjectMeta)
	}
	if o.GroupVersionKind() != widgetGVK {
		t.Errorf("kind %v, want %v", o.GroupVersionKind(), widgetGVK)
	}
	spec, ok := o.Field("spec")
	if !ok || string(spec) != `{"size":3,"ratio":0.5,"tags":["a","b"],"text":"q\"uote\\ {not a brace}"}` {
		t.Errorf("spec %s (found %v)", spec, ok)
	}
	for _, name := range []string{"metadata", "apiVersion", "kind", "missing"} {
		if _, ok := o.Field(name); ok {
			t.Errorf("Field(%q) found something; it is not a field of the body", name)
		}
	}
	status, err := o.DecodeField("status")
	if err != nil || status.(map[string]any)["ready"] != true {
		t.Errorf("status %v (%v)", status, err)
	}
	missing, err := o.DecodeField("missing")
	if err != nil || missing != nil {
		t.Errorf("a missing field decoded to %v (%v), want nil", missing, err)
	}
}

func TestEncodeRoundTrips(t *testing.T) {
	t.Parallel()
	o := decode(t, widgetGVK, widgetJSON)
	o.ManagedFields = nil
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if err := json.Unmarshal([]byte(widgetJSON), &want); err != nil {
		t.Fatal(err)
	}
	delete(want["metadata"].(map[string]any), "managedFields")
	// ObjectMeta encodes a zero creationTimestamp as null.
	delete(got["metadata"].(map[string]any), "creationTimestamp")
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("encoded\n%s\nwant\n%s", g, w)
	}

	// The kind comes from the object, not from what was decoded: items of a
	// built-in kind's list carry none.
	cm := decode(t, configMapGVK, `{"metadata":{"name":"c"},"data":{"k":"v"}}`)
	cm.SetGroupVersionKind(configMapGVK)
	raw, err = json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(raw), `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"`) || !strings.HasSuffix(string(raw), `,"data":{"k":"v"}}`) {
		t.Errorf("encoded %s", raw)
	}
}

func TestDecodeRefusesWhatIsNotAnObject(t *testing.T) {
	t.Parallel()
	for name, data := range map[string]string{
		"if it is an array, then an error":               `[1,2]`,
		"if a string is unterminated, then an error":     `{"spec":"abc}`,
		"if a value is missing, then an error":           `{"spec":}`,
		"if members are not separated, then an error":    `{"a":1 "b":2}`,
		"if the object is not closed, then an error":     `{"spec":{"a":1}`,
		"if something follows the object, then an error": `{"a":1} x`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if err := (&object.Object{}).UnmarshalJSON([]byte(data)); err == nil {
				t.Errorf("decoded %s", data)
			}
		})
	}
	t.Run("if the metadata is of the wrong type, then an error", func(t *testing.T) {
		t.Parallel()
		if err := json.Unmarshal([]byte(`{"metadata":{"name":3}}`), &object.Object{}); err == nil {
			t.Error("decoded a numeric name")
		}
	})
}

func TestKeysWithEscapesAreDecoded(t *testing.T) {
	t.Parallel()
	o := decode(t, widgetGVK, `{"\u006detadata":{"name":"w"},"sp\u00e9c":1,"a\"b":2}`)
	if o.GetName() != "w" {
		t.Errorf("an escaped metadata key was not read as metadata: %+v", o.ObjectMeta)
	}
	if v, ok := o.Field("spéc"); !ok || string(v) != "1" {
		t.Errorf("spéc = %s, %v", v, ok)
	}
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(raw, &back); err != nil || back["a\"b"] != float64(2) || back["spéc"] != float64(1) {
		t.Errorf("encoded %s (%v)", raw, err)
	}
}

func TestDeepCopySharesTheBodyAndCopiesTheMetadata(t *testing.T) {
	t.Parallel()
	o := decode(t, widgetGVK, widgetJSON)
	c := o.DeepCopyObject().(*object.Object)
	c.Labels["app"] = "changed"
	c.SetFinalizers([]string{"x"})
	if o.GetLabels()["app"] != "web" || len(o.GetFinalizers()) != 0 {
		t.Errorf("changing the copy changed the original: %+v", o.ObjectMeta)
	}
	a, _ := o.Field("spec")
	b, _ := c.Field("spec")
	if &a[0] != &b[0] {
		t.Error("the copy does not share the body")
	}
}

// The API machinery decodes lists and watch events through the scheme: that
// is how the cache's informers and the client read Objects.
func TestTheSchemeDecodesListsOfObjects(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	object.AddToScheme(scheme, widgetGVK, configMapGVK)
	decoder := serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}.UniversalDeserializer()

	cms := &corev1.ConfigMapList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42"},
		Items: []corev1.ConfigMap{
			{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}, Data: map[string]string{"k": "1"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Data: map[string]string{"k": "2"}},
		},
	}
	out, _, err := decoder.Decode([]byte(mustJSON(t, cms)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, ok := out.(*object.List)
	if !ok {
		t.Fatalf("decoded a %T, want *object.List", out)
	}
	if list.ResourceVersion != "42" || len(list.Items) != 2 || list.Items[1].GetName() != "b" {
		t.Errorf("list %+v", list)
	}
	if data, _ := list.Items[1].Field("data"); string(data) != `{"k":"2"}` {
		t.Errorf("item b has data %s", data)
	}
	copied := list.DeepCopyObject().(*object.List)
	copied.Items[0].SetName("changed")
	if list.Items[0].GetName() != "a" {
		t.Error("changing the list's copy changed the list")
	}

	one, gvk, err := decoder.Decode([]byte(widgetJSON), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := one.(*object.Object); !ok || *gvk != widgetGVK {
		t.Errorf("decoded a %T of kind %v", one, gvk)
	}
}

func TestTransformSetsTheKindAndStripsManagedFields(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		o := decode(t, widgetGVK, widgetJSON)
		o.SetGroupVersionKind(schema.GroupVersionKind{})
		out, err := object.Transform(widgetGVK, keep)(o)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*object.Object)
		if got.GroupVersionKind() != widgetGVK {
			t.Errorf("kind %v after the transform", got.GroupVersionKind())
		}
		if kept := len(got.ManagedFields) > 0; kept != keep {
			t.Errorf("keepManagedFields=%v: managedFields %v", keep, got.ManagedFields)
		}
	}
}

func TestUnstructuredHoldsTheWholeObject(t *testing.T) {
	t.Parallel()
	o := decode(t, widgetGVK, widgetJSON)
	u, err := o.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	if u.GetName() != "w" || u.GroupVersionKind() != widgetGVK || u.Object["spec"].(map[string]any)["size"] != int64(3) {
		t.Errorf("unstructured %v", u.Object)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// BenchmarkUnmarshalJSON decodes a Widget as a watch event carries it,
// managedFields included.
func BenchmarkUnmarshalJSON(b *testing.B) {
	raw := []byte(`{"apiVersion":"bench.polyop.dev/v1alpha1","kind":"Widget","metadata":{"name":"w-0001","namespace":"bench",` +
		`"uid":"6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b","resourceVersion":"12345","generation":1,"creationTimestamp":"2026-01-02T03:04:05Z",` +
		`"managedFields":[{"manager":"bench","operation":"Update","apiVersion":"bench.polyop.dev/v1alpha1","time":"2026-01-02T03:04:05Z",` +
		`"fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:data":{".":{},"f:a":{},"f:b":{},"f:c":{},"f:d":{}}}}},` +
		`{"manager":"host","operation":"Update","apiVersion":"bench.polyop.dev/v1alpha1","time":"2026-01-02T03:04:06Z","fieldsType":"FieldsV1",` +
		`"fieldsV1":{"f:status":{".":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},` +
		`"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:configMap":{},"f:observedGeneration":{}}},"subresource":"status"}]},` +
		`"spec":{"data":{"a":"` + strings.Repeat("a", 128) + `","b":"` + strings.Repeat("b", 128) + `","c":"` + strings.Repeat("c", 128) + `","d":"` + strings.Repeat("d", 128) + `"}},` +
		`"status":{"observedGeneration":1,"configMap":"w-0001","conditions":[{"type":"Ready","status":"True","observedGeneration":1,` +
		`"lastTransitionTime":"2026-01-02T03:04:06Z","reason":"ConfigMapApplied","message":"the ConfigMap holds the data"}]}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		var o object.Object
		if err := o.UnmarshalJSON(raw); err != nil {
			b.Fatal(err)
		}
	}
}
