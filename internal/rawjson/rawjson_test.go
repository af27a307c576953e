package rawjson_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/polyop/polyop/internal/rawjson"
)

// member is one member of a JSON object: its key, decoded, and its value as
// it is in the JSON.
type member struct {
	Key   string
	Value json.RawMessage
}

// members collects what rawjson.Each reads of data, in order.
func members(data []byte) ([]member, error) {
	var out []member
	err := rawjson.Each(data, func(key string, value json.RawMessage) error {
		out = append(out, member{Key: key, Value: value})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func TestMembers(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{}`,
		` { "a" : 1 , "b":"x}\"]," ,"c":{"d":[1,{"e":"]}"}],"f":null},"g":[ ],"h":true,"i":-1.5e3 } `,
		`{"k\u00e9y":"v","esc\"aped":{"x":"\\"}}`,
	} {
		members, err := members([]byte(raw))
		if err != nil {
			t.Errorf("%s: not split: %v", raw, err)
			continue
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		if len(members) != len(want) {
			t.Errorf("%s: %d members, want %d", raw, len(members), len(want))
		}
		for _, m := range members {
			if string(m.Value) != string(want[m.Key]) {
				t.Errorf("%s: member %q = %s, want %s", raw, m.Key, m.Value, want[m.Key])
			}
		}
	}
	for _, raw := range []string{``, `[]`, `"x"`, `{"a":1`, `{"a" 1}`, `{"a":"x}`, `{"a":1}}`, `{a:1}`} {
		if _, err := members([]byte(raw)); err == nil {
			t.Errorf("%q was split as an object", raw)
		}
	}
}

func TestEachStops(t *testing.T) {
	t.Parallel()
	var keys []string
	err := rawjson.Each([]byte(`{"a":1,"b":2,"c":3}`), func(key string, _ json.RawMessage) error {
		keys = append(keys, key)
		if key == "b" {
			return rawjson.Stop
		}
		return nil
	})
	if err != nil || len(keys) != 2 {
		t.Errorf("keys %v (%v), want a and b and no error", keys, err)
	}
	boom := errors.New("boom")
	if err := rawjson.Each([]byte(`{"a":1}`), func(string, json.RawMessage) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("error %v, want the function's", err)
	}
}

func TestAppendMemberWritesJSON(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"spec":       `{"spec":1}`,
		"a\"b":       `{"a\"b":1}`,
		"spéc":       `{"spéc":1}`,
		"<tag>&\x01": `{"\u003ctag\u003e\u0026\u0001":1}`,
	} {
		got := string(append(rawjson.AppendMember([]byte("{"), key, []byte("1")), '}'))
		if got != want {
			t.Errorf("AppendMember(%q) = %s, want %s", key, got, want)
		}
		var back map[string]int
		if err := json.Unmarshal([]byte(got), &back); err != nil || back[key] != 1 {
			t.Errorf("%s does not decode back to key %q: %v", got, key, err)
		}
	}
}

func TestAppendCanonical(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		`{ "b" : [ 1 , 2.50 , "x" ] , "a" : { "d" : null , "c" : true } }`: `{"a":{"c":true,"d":null},"b":[1,2.5,"x"]}`,
		`{"a":1,"a":2}`: `{"a":2}`,
		`{"n":1.0,"e":1E3,"f":-2.5e-7,"i":-0,"s":1}`: `{"e":1000,"f":-2.5e-07,"i":-0,"n":1,"s":1}`,
		`{"k\u00e9y":"\u003c\/\u0041>","b\"":"é"}`:   `{"b\"":"é","kéy":"\u003c/A\u003e"}`,
		`{"z":{},"y":[],"x":""}`:                     `{"x":"","y":[],"z":{}}`,
		`"plain"`:                                    `"plain"`,
	} {
		got, err := rawjson.AppendCanonical([]byte("prefix"), []byte(doc))
		if err != nil || string(got) != "prefix"+want {
			t.Errorf("AppendCanonical(%s) = %s, %v; want prefix%s", doc, got, err, want)
			continue
		}
		// encoding/json's encoding of the same value is the same value.
		var v any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		std, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := rawjson.AppendCanonical(nil, std); err != nil || string(again) != want {
			t.Errorf("AppendCanonical(%s), encoded again as %s, is %s, %v; want %s", doc, std, again, err, want)
		}
	}
	// A number out of a float's range is kept as it is written.
	if got, err := rawjson.AppendCanonical(nil, []byte(`{"b":1e400,"a":1.0}`)); err != nil || string(got) != `{"a":1,"b":1e400}` {
		t.Errorf("AppendCanonical of 1e400 = %s, %v", got, err)
	}
	for _, doc := range []string{``, ` `, `{"a":1`, `{"a" 1}`, `[1,}`, `{"a":[1}`} {
		if got, err := rawjson.AppendCanonical(nil, []byte(doc)); err == nil {
			t.Errorf("AppendCanonical(%q) = %s, want an error", doc, got)
		}
	}
}

// AppendCanonical into a buffer large enough allocates nothing for JSON
// without escapes: it runs on every status the host compares.
func TestAppendCanonicalAllocatesNothing(t *testing.T) {
	doc := []byte(`{"observedGeneration":1,"configMap":"w-0001","conditions":[{"type":"Ready","status":"True",` +
		`"observedGeneration":1,"lastTransitionTime":"2026-01-02T03:04:05Z","reason":"ConfigMapApplied","message":"ok","ratio":0.5}]}`)
	buf := make([]byte, 0, 2*len(doc))
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := rawjson.AppendCanonical(buf[:0], doc); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendCanonical allocates %.0f times, want none", allocs)
	}
}

// AppendAsMarshalled writes what json.Marshal writes for what the API
// machinery's decoder reads.
func TestAppendAsMarshalled(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`null`, `true`, `0`, `-0`, `-0.0`, `1.0`, `1E3`, `12`, `9223372036854775807`, `9223372036854775808`,
		`18446744073709551616`, `1.5`, `1e-7`, `1e-6`, `0.000001`, `1e20`, `1e21`, `123456789.125`, `-2.5e-300`,
		`""`, `"plain"`, `"<&>\"\\\u2028\u0001é☃"`, `"\ud800"`, "\"caf\xc3\xa9 \xff\"", `[]`, `{}`,
		`[null,1,"a",[],{}]`,
		` { "b" : 1 , "a" : { "z" : [ 1 , 2 , { "y" : null , "x" : "\t" } ] , "é" : true , "A" : false } , "" : "e" , "a\u0000" : 0 , "b" : 2 } `,
		"{\"k\xff\":1,\"k\\ufffd\":2}",
	} {
		var v any
		if err := utiljson.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rawjson.AppendAsMarshalled([]byte("prefix"), []byte(doc))
		if err != nil || string(got) != "prefix"+string(want) {
			t.Errorf("AppendAsMarshalled(%s) = %s, %v; want prefix%s", doc, got, err, want)
		}
	}
	if got, err := rawjson.AppendAsMarshalled(nil, []byte(`{"a":1e400}`)); err == nil {
		t.Errorf("AppendAsMarshalled of 1e400 = %s, want an error", got)
	}
}

func TestNumbersFit(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]bool{
		`{"a":1,"b":-2.5e300,"c":"1e400","d":[1e308]}`: true,
		`{"a":1e400}`:                 false,
		`[1,-1E+309]`:                 false,
		`{"s":"\"1e999\"","n":1e-5}`:  true,
		`123456789012345678901234567`: true,
	} {
		if got := rawjson.NumbersFit([]byte(doc)); got != want {
			t.Errorf("NumbersFit(%s) = %v, want %v", doc, got, want)
		}
		var v any
		if err := utiljson.Unmarshal([]byte(doc), &v); (err == nil) != want {
			t.Errorf("%s: the API machinery's decoder says %v", doc, err)
		}
	}
}

func TestEachRaw(t *testing.T) {
	t.Parallel()
	var keys []string
	err := rawjson.EachRaw([]byte(`{"plain":1,"esc\u0061ped":2,"caf\u00e9":3,"é":4}`), func(key []byte, value json.RawMessage) error {
		keys = append(keys, string(key)+"="+string(value))
		return nil
	})
	if want := []string{"plain=1", "escaped=2", "café=3", "é=4"}; err != nil || !slices.Equal(keys, want) {
		t.Errorf("keys %q (%v), want %q", keys, err, want)
	}
}
