package rawjson_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/polyop/polyop/internal/rawjson"
)

func TestMembers(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{}`,
		` { "a" : 1 , "b":"x}\"]," ,"c":{"d":[1,{"e":"]}"}],"f":null},"g":[ ],"h":true,"i":-1.5e3 } `,
		`{"k\u00e9y":"v","esc\"aped":{"x":"\\"}}`,
	} {
		members, err := rawjson.Members([]byte(raw))
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
		if _, err := rawjson.Members([]byte(raw)); err == nil {
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
