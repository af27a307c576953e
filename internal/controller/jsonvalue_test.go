package controller

import (
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

func TestSameStatus(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		stored, sent string
		want         bool
	}{
		"if the sidecar sends 1.0 where the API server stored 1, the status is the same": {
			stored: `{"ratio":1,"list":[{"n":2}]}`, sent: `{"ratio":1.0,"list":[{"n":2.0}]}`, want: true,
		},
		"if a number changed, the status is not the same": {
			stored: `{"ratio":1}`, sent: `{"ratio":1.5}`,
		},
		"if a whole number is beyond a float's precision, it is not the float it rounds to": {
			stored: `{"n":9007199254740993}`, sent: `{"n":9007199254740992.0}`,
		},
		"if a number became a string, the status is not the same": {
			stored: `{"n":1}`, sent: `{"n":"1"}`,
		},
		"if a member was added, the status is not the same": {
			stored: `{"a":1}`, sent: `{"a":1,"b":null}`,
		},
		"if there is no status and the sidecar sends an empty one, it is the same": {
			stored: `null`, sent: `{}`, want: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var stored any
			if err := utiljson.Unmarshal([]byte(tc.stored), &stored); err != nil {
				t.Fatal(err)
			}
			sent, err := parseStatus([]byte(tc.sent))
			if err != nil {
				t.Fatal(err)
			}
			if got := sameStatus(stored, sent); got != tc.want {
				t.Errorf("sameStatus(%s, %s) = %v, want %v", tc.stored, tc.sent, got, tc.want)
			}
		})
	}
}
