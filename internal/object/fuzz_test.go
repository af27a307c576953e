package object_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsjson "sigs.k8s.io/json"

	"github.com/polyop/polyop/internal/object"
)

// typedMeta is what the API machinery's typed decoder reads of any object:
// the reference for an Object's kind and metadata.
type typedMeta struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// FuzzObject decodes arbitrary JSON into an Object as the API machinery's
// serializer does, and checks it against the API machinery's own decoders:
// the kind and metadata as its typed decoder reads them, each other member
// (Field, DecodeField, Unstructured) as encoding/json and unstructured
// decoding read them (the last of duplicate keys wins), an error exactly
// where the typed decoder fails or the input is not a JSON object, and an
// encoding that decodes back to the same encoding.
//
// The seeds run with go test; `make fuzz` runs it longer.
func FuzzObject(f *testing.F) {
	for _, seed := range []string{
		widgetJSON,
		`{}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":null,"data":null}`,
		`{"apiVersion":"","kind":"","metadata":{}}`,
		`{"kind":"Widget","metadata":{"name":"a","namespace":"x"},"metadata":{"name":"b"}}`,
		`{"spec":1,"Kind":"x","METADATA":{"name":3}}`,
		`{"\u006detadata":{"name":"w"},"sp\u00e9c":1,"a\"b":2}`,
		`{"metadata":{"creationTimestamp":"2026-01-02T03:04:05.5+02:00","labels":{},"annotations":{"a":""}}}`,
		`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"n","uid":"u","controller":true}]}}`,
		`{"status":{"big":18446744073709551616,"small":-9223372036854775808,"f":1e308,"e":1E2}}`,
		`{"status":{"huge":1e400}}`,
		"{\"bad\xff\":\"\xff\"}",
		`{"metadata":{"name":3}}`,
		`{"metadata":[]}`,
		`{"apiVersion":1}`,
		`[1,2]`, `null`, `"x"`, `{"a":1} x`, `{"a":`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o := &object.Object{}
		err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, o)
		if !json.Valid(data) {
			if err == nil {
				t.Fatalf("%q is not valid JSON, yet it was decoded", data)
			}
			return
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(data, &members) != nil || members == nil {
			if err == nil {
				t.Fatalf("%q is not a JSON object, yet it was decoded", data)
			}
			return
		}
		var ref typedMeta
		refErr := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &ref)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("%q: decoding error %v, the typed decoder's %v", data, err, refErr)
		}
		if err != nil {
			return
		}

		if o.TypeMeta != ref.TypeMeta || !equality.Semantic.DeepEqual(o.ObjectMeta, ref.ObjectMeta) {
			t.Fatalf("%q: decoded %+v %+v, the typed decoder reads %+v %+v", data, o.TypeMeta, o.ObjectMeta, ref.TypeMeta, ref.ObjectMeta)
		}
		body := maps.Clone(members)
		for _, k := range []string{"apiVersion", "kind", "metadata"} {
			delete(body, k)
		}
		for k, want := range body {
			got, ok := o.Field(k)
			if !ok || !bytes.Equal(got, bytes.TrimSpace(want)) {
				t.Fatalf("%q: Field(%q) = %s (found %v), encoding/json reads %s", data, k, got, ok, want)
			}
			var wantValue any
			wantErr := utiljson.Unmarshal(want, &wantValue)
			gotValue, err := o.DecodeField(k)
			if (err == nil) != (wantErr == nil) || err == nil && !equality.Semantic.DeepEqual(gotValue, wantValue) {
				t.Fatalf("%q: DecodeField(%q) = %#v (%v), the API machinery reads %#v (%v)", data, k, gotValue, err, wantValue, wantErr)
			}
		}
		for _, k := range []string{"apiVersion", "kind", "metadata", "missing"} {
			if _, ok := body[k]; !ok {
				if v, ok := o.Field(k); ok {
					t.Fatalf("%q: Field(%q) = %s, want none", data, k, v)
				}
			}
		}

		encoded, err := o.MarshalJSON()
		if err != nil {
			t.Fatalf("%q: encoding: %v", data, err)
		}
		var back map[string]json.RawMessage
		if err := json.Unmarshal(encoded, &back); err != nil {
			t.Fatalf("%q: encoded as %s, not a JSON object: %v", data, encoded, err)
		}
		for _, k := range []string{"apiVersion", "kind", "metadata"} {
			delete(back, k)
		}
		if !slices.Equal(slices.Sorted(maps.Keys(back)), slices.Sorted(maps.Keys(body))) {
			t.Fatalf("%q: encoded as %s, with other members", data, encoded)
		}
		again := &object.Object{}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(encoded, again); err != nil {
			t.Fatalf("%q: its encoding %s does not decode: %v", data, encoded, err)
		}
		if encodedAgain, err := again.MarshalJSON(); err != nil || !bytes.Equal(encodedAgain, encoded) {
			t.Fatalf("%q: encoded as %s, decoded and encoded again as %s (%v)", data, encoded, encodedAgain, err)
		}

		var whole map[string]any
		if utiljson.Unmarshal(data, &whole) != nil {
			return // a number out of range: the API machinery refuses it too
		}
		u, err := o.Unstructured()
		if err != nil {
			t.Fatalf("%q: Unstructured: %v", data, err)
		}
		if u.GetAPIVersion() != o.APIVersion || u.GetKind() != o.Kind || u.GetName() != o.Name || u.GetNamespace() != o.Namespace {
			t.Fatalf("%q: Unstructured has kind %s %s and name %s/%s", data, u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
		}
		for k := range body {
			if !equality.Semantic.DeepEqual(u.Object[k], whole[k]) {
				t.Fatalf("%q: Unstructured has %s: %#v, the API machinery reads %#v", data, k, u.Object[k], whole[k])
			}
		}
	})
}
