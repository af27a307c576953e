package rawjson

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestEachElement(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		in      string
		want    []string
		wantErr bool
	}{
		"if the array is empty, there is no element":           {in: " [ ] ", want: nil},
		"if the elements nest, each comes whole":               {in: `[1, "a,]", {"b":[2,3]}, [], null]`, want: []string{`1`, `"a,]"`, `{"b":[2,3]}`, `[]`, `null`}},
		"if it is not an array, it is an error":                {in: `{"a":1}`, wantErr: true},
		"if something follows the array, it is an error":       {in: `[1] 2`, wantErr: true},
		"if an element is not followed by , or ], it is error": {in: `[1 2]`, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var got []string
			err := EachElement([]byte(tc.in), func(v json.RawMessage) error {
				got = append(got, string(v))
				return nil
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("EachElement(%s) error = %v, want an error: %v", tc.in, err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("EachElement(%s) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
