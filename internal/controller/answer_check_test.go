package controller

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func TestCheckAnswer(t *testing.T) {
	t.Parallel()
	kinds := []ChildKind{{GVK: configMapGVK, Namespaced: true}}
	child := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`)
	for name, tc := range map[string]struct {
		resp    *polyopv1alpha1.ReconcileResponse
		limit   int
		wantErr []string
	}{
		"if the answer is one the host applies, the children come back as the host would apply them": {
			resp: &polyopv1alpha1.ReconcileResponse{Status: []byte(`{"phase":"Ready"}`), DesiredChildren: [][]byte{child}},
		},
		"if the status is not an object and a child is of a kind not owned, both are reported": {
			resp:    &polyopv1alpha1.ReconcileResponse{Status: []byte(`[]`), DesiredChildren: [][]byte{[]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`)}},
			wantErr: []string{"the host would refuse this answer", "not a JSON object", "Secret.v1 is not a kind the controller owns (it owns ConfigMap.v1)"},
		},
		"if the failure is terminal with a retry_after, it is refused": {
			resp:    &polyopv1alpha1.ReconcileResponse{Error: &polyopv1alpha1.Failure{Message: "m", Terminal: true, RetryAfter: durationpb.New(5e9)}},
			wantErr: []string{"terminal (never retried) and has a retry_after of 5s"},
		},
		"if the status is larger than the limit, its size is reported": {
			resp:    &polyopv1alpha1.ReconcileResponse{Status: []byte(`{"x":"` + strings.Repeat("a", 100) + `"}`)},
			limit:   50,
			wantErr: []string{"status is 108 bytes, over the limit of 50 bytes"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := CheckAnswer(tc.resp, owner(), "widget", kinds, tc.limit)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("CheckAnswer: %v", err)
				}
				if len(got) != 1 || got[0].GetNamespace() != "ns" || got[0].GetLabels()[ControllerLabel] != "widget" || len(got[0].GetOwnerReferences()) != 1 {
					t.Fatalf("children = %v, want the ConfigMap in ns with the controller label and the owner reference", got)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckAnswer accepted the answer, want an error with %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}
