package rawjson_test

import (
	"bytes"
	"encoding/json"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/polyop/polyop/internal/rawjson"
)

// FuzzEach checks the member reader against encoding/json: on a valid JSON
// object it yields the same keys, in the same order, with the same values
// (sliced from the input, without surrounding space); on valid JSON that is
// not an object it fails; and on any input it accepts, the structure is
// sound: once its values and keys are valid, the whole input is valid JSON.
//
// The seeds run with go test; `make fuzz` runs it longer.
func FuzzEach(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		` { } `,
		`{"a":1}`,
		` { "a" : 1 , "b":"x}\"]," ,"c":{"d":[1,{"e":"]}"}],"f":null},"g":[ ],"h":true,"i":-1.5e3 } `,
		`{"k\u00e9y":"v","esc\"aped":{"x":"\\"}}`,
		`{"a":1,"a":2}`,
		`{"spec":{"x":[1,2,{"y":"}"}]},"status":{}}`,
		`{"\ud83d\ude00":"\u0000"}`,
		"{\"caf\xc3\xa9\":1}",
		"{\"ctl\x01\":1}",
		`{"a":[1}}`,
		`{"a":{]}`,
		`{"a":tru}`,
		`{"a":1 2}`,
		`{"a":1,}`,
		`{,"a":1}`,
		`{"a"}`,
		`{"a":}`,
		`{"a":1}}`,
		`{"a":"\q"}`,
		`{"\q":1}`,
		`[]`, `"x"`, `null`, `1`, ``, ` `, `{`, `}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got []member
		err := rawjson.Each(data, func(key string, value json.RawMessage) error {
			got = append(got, member{Key: key, Value: value})
			return nil
		})
		if err == nil {
			checkSlices(t, data, got)
		}

		if json.Valid(data) {
			want, isObject := stdMembers(t, data)
			if !isObject {
				if err == nil {
					t.Fatalf("%q is not a JSON object, but was read as one: %q", data, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("%q is a valid JSON object, but was not read: %v", data, err)
			}
			if len(got) != len(want) {
				t.Fatalf("%q: %d members, encoding/json reads %d", data, len(got), len(want))
			}
			for i := range want {
				if got[i].Key != want[i].Key || !bytes.Equal(got[i].Value, want[i].Value) {
					t.Fatalf("%q: member %d is %q: %s, encoding/json reads %q: %s", data, i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
				}
			}
			return
		}

		if err != nil {
			return
		}
		// Invalid JSON read without an error: Each checks the structure, not
		// every literal or string, so one of those must be what is invalid.
		for _, m := range got {
			if !json.Valid(m.Value) || bytes.ContainsFunc([]byte(m.Key), func(r rune) bool { return r < 0x20 }) {
				return
			}
		}
		t.Fatalf("%q is not valid JSON, yet its structure was accepted with valid keys and values %q", data, got)
	})
}

// FuzzAppendString checks that AppendString writes what json.Marshal writes,
// byte for byte, and that AppendMember writes an object member that decodes
// back to the key and value.
func FuzzAppendString(f *testing.F) {
	for _, seed := range []string{"", "spec", `a"b`, `back\slash`, "spéc", "<tag>&\x01", "\x7f", "bad\xff", "\u2028\u2029", "tab\t"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := rawjson.AppendString([]byte("prefix"), s); string(got) != "prefix"+string(want) {
			t.Fatalf("AppendString(%q) = %s, json.Marshal writes %s", s, got[len("prefix"):], want)
		}
		obj := append(rawjson.AppendMember([]byte("{"), s, []byte(`[1]`)), '}')
		members, err := members(obj)
		if err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		var back string
		_ = json.Unmarshal(want, &back) // s as encoding/json reads it: invalid UTF-8 replaced
		if len(members) != 1 || members[0].Key != back || string(members[0].Value) != `[1]` {
			t.Fatalf("AppendMember(%q) = %s, read back as %q", s, obj, members)
		}
	})
}

// stdMembers reads the members of valid JSON data with encoding/json's
// tokenizer, in order (duplicates kept), or reports that data is not an
// object.
func stdMembers(t *testing.T, data []byte) ([]member, bool) {
	t.Helper()
	if trimmed := bytes.TrimSpace(data); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		t.Fatalf("%q: %v", data, err)
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		out = append(out, member{Key: tok.(string), Value: bytes.TrimSpace(value)})
	}
	return out, true
}

// checkSlices checks that the values are slices of data (their offset told
// by their capacity), in order, not overlapping, without surrounding space.
func checkSlices(t *testing.T, data []byte, members []member) {
	t.Helper()
	next := 0
	for _, m := range members {
		start := cap(data) - cap(m.Value)
		end := start + len(m.Value)
		if len(m.Value) == 0 || start < next || end > len(data) || !bytes.Equal(data[start:end], m.Value) {
			t.Fatalf("%q: the value of member %q (%q) is not the next slice of the input", data, m.Key, m.Value)
		}
		next = end
		if v := bytes.TrimSpace(m.Value); len(v) != len(m.Value) {
			t.Fatalf("%q: the value of member %q has surrounding space: %q", data, m.Key, m.Value)
		}
	}
}

// FuzzAppendAsMarshalled checks AppendAsMarshalled against the API
// machinery's decoder and encoding/json: for any JSON the decoder reads, it
// writes what json.Marshal writes for what the decoder read; and
// AppendCanonical of its own encoding is that encoding again.
//
// The seeds run with go test; `make fuzz` runs it longer.
func FuzzAppendAsMarshalled(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"b":1,"a":[1.0,-0,1e3,"x\u00e9"],"a":{"z":null}}`, `{"n":9223372036854775808,"f":1e-7,"g":1e21}`,
		`{"huge":1e400}`, `"\ud800"`, "{\"caf\xc3\xa9\":\"\xff\"}", `[true,false,null]`, `-0.0`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var v any
		decodeErr := utiljson.Unmarshal(data, &v)
		if fits := rawjson.NumbersFit(data); fits != (decodeErr == nil) {
			t.Fatalf("%q: NumbersFit says %v, the decoder %v", data, fits, decodeErr)
		}
		got, err := rawjson.AppendAsMarshalled(nil, data)
		if decodeErr != nil {
			if err == nil {
				t.Fatalf("%q: the decoder refuses it (%v), AppendAsMarshalled writes %s", data, decodeErr, got)
			}
			return
		}
		want, err2 := json.Marshal(v)
		if err != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q: AppendAsMarshalled = %s, %v; json.Marshal = %s, %v", data, got, err, want, err2)
		}
		canonical, err := rawjson.AppendCanonical(nil, data)
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		if again, err := rawjson.AppendCanonical(nil, canonical); err != nil || !bytes.Equal(again, canonical) {
			t.Fatalf("%q: canonical %s, again %s, %v", data, canonical, again, err)
		}
	})
}
