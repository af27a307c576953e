package controller

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
)

// appendJSON must write exactly what json.Marshal writes, for every value
// unstructured content holds: the hash of a child's configuration is the
// hash of that encoding.
func TestAppendJSONIsJSONMarshal(t *testing.T) {
	t.Parallel()
	docs := []string{
		`null`, `true`, `false`, `0`, `-12`, `9223372036854775807`, `1.5`, `1e-7`, `1e21`, `123456789.125`, `""`,
		`"plain"`, `"<&>\"\\\u2028\u0001é☃"`, `"\ud800"`, `[]`, `{}`, `[null,1,"a",[],{}]`,
		`{"b":1,"a":{"z":[1,2,{"y":null,"x":"\t"}],"é":true,"A":false},"":"empty key","a\u0000":0}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w","namespace":"ns","labels":{"polyop.dev/controller":"widget"},` +
			`"ownerReferences":[{"apiVersion":"e2e.polyop.dev/v1","kind":"Widget","name":"w","uid":"u","controller":true,"blockOwnerDeletion":true}]},` +
			`"data":{"k":"v"},"binaryData":null,"spec":{"replicas":3,"ratio":0.25,"big":12345678901234567890}}`,
	}
	for _, doc := range docs {
		var v any
		if err := utiljson.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendJSON([]byte("prefix"), v)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if string(got) != "prefix"+string(want) {
			t.Errorf("%s:\n got %s\nwant prefix%s", doc, got, want)
		}
	}
	// Values a decoder never makes go through json.Marshal, errors included.
	for _, v := range []any{map[string]any(nil), []any(nil), map[string]string{"b": "1", "a": "2"}, int32(7), 2.5} {
		want, _ := json.Marshal(v)
		if got, err := appendJSON(nil, v); err != nil || string(got) != string(want) {
			t.Errorf("%#v: got %s, %v; want %s", v, got, err, want)
		}
	}
	if _, err := appendJSON(nil, map[string]any{"nan": math.NaN()}); err == nil {
		t.Error("NaN: no error, as json.Marshal gives one")
	}
}

// The owner reference validateChildren sets directly is the one
// Unstructured.SetOwnerReferences sets.
func TestOwnerReferenceContentIsSetOwnerReferences(t *testing.T) {
	t.Parallel()
	ref := metav1.OwnerReference{APIVersion: "e2e.polyop.dev/v1", Kind: "Widget", Name: "w", UID: "owner-uid",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ref)
	if err != nil {
		t.Fatal(err)
	}
	if got := ownerReferenceContent(ref); !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{}}}
	u.SetOwnerReferences([]metav1.OwnerReference{ref})
	if got := u.Object["metadata"].(map[string]any)["ownerReferences"]; !reflect.DeepEqual(got, []any{ownerReferenceContent(ref)}) {
		t.Errorf("SetOwnerReferences sets %#v", got)
	}
}

// setControllerLabel sets what NestedStringMap and SetLabels would, and
// refuses the same labels with the same error.
func TestSetControllerLabel(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{"metadata":{"name":"a"}}`,
		`{"metadata":{"name":"a","labels":null}}`,
		`{"metadata":{"name":"a","labels":{}}}`,
		`{"metadata":{"name":"a","labels":{"x":"1","polyop.dev/controller":"other"}}}`,
		`{"metadata":{"name":"a","labels":{"x":1}}}`,
		`{"metadata":{"name":"a","labels":"x"}}`,
	} {
		decode := func() *unstructured.Unstructured {
			var m map[string]any
			if err := utiljson.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatal(err)
			}
			return &unstructured.Unstructured{Object: m}
		}
		got, want := decode(), decode()
		gotErr := setControllerLabel(got, "ctl", nil)
		labels, _, wantErr := unstructured.NestedStringMap(want.Object, "metadata", "labels")
		if wantErr == nil {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[ControllerLabel] = "ctl"
			want.SetLabels(labels)
		}
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Errorf("%s: error %v, want %v", doc, gotErr, wantErr)
			continue
		}
		if wantErr == nil && !reflect.DeepEqual(got.Object, want.Object) {
			t.Errorf("%s:\n got %#v\nwant %#v", doc, got.Object, want.Object)
		}
	}
}
