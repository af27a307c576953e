package controller

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func TestABadAnswerIsRefusedWithAWarningAndNothingWritten(t *testing.T) {
	t.Parallel()
	big := []byte(`{"x":"` + strings.Repeat("a", 2000) + `"}`)
	for name, tc := range map[string]struct {
		resp       *polyopv1alpha1.ReconcileResponse
		wantReason string
		wantErr    []string
	}{
		"if the status is not JSON, the event is InvalidStatus": {
			resp:       &polyopv1alpha1.ReconcileResponse{Status: []byte(`{"phase":`)},
			wantReason: ReasonInvalidStatus,
			wantErr:    []string{"not valid JSON"},
		},
		"if the status is not an object, the event is InvalidStatus": {
			resp:       &polyopv1alpha1.ReconcileResponse{Status: []byte(`["a"]`)},
			wantReason: ReasonInvalidStatus,
			wantErr:    []string{"not a JSON object"},
		},
		"if the status is over the limit, the error says its size and the limit": {
			resp:       &polyopv1alpha1.ReconcileResponse{Status: big},
			wantReason: ReasonInvalidStatus,
			wantErr:    []string{"status is 2008 bytes, over the limit of 1000 bytes"},
		},
		"if a child is over the limit, the event is InvalidDesiredChildren": {
			resp:       &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{secretChild("a", "x"), big}, Status: []byte(`{"phase":"x"}`)},
			wantReason: ReasonInvalidDesiredChildren,
			wantErr:    []string{"desired_children[1] is 2008 bytes, over the limit of 1000 bytes"},
		},
		"if the error is terminal and has a retry_after, the event is InvalidFailure naming the contradiction": {
			resp: &polyopv1alpha1.ReconcileResponse{Status: []byte(`{"phase":"x"}`), DesiredChildren: [][]byte{secretChild("a", "x")},
				Events: []*polyopv1alpha1.Event{{Reason: "Seen"}},
				Error:  &polyopv1alpha1.Failure{Message: "m", Terminal: true, RetryAfter: durationpb.New(time.Second)}},
			wantReason: ReasonInvalidFailure,
			wantErr:    []string{"error is terminal (never retried) and has a retry_after of 1s (retried then): it must be one or the other"},
		},
		"if the error's retry_after is not a valid duration, the event is InvalidFailure": {
			resp:       &polyopv1alpha1.ReconcileResponse{Error: &polyopv1alpha1.Failure{Message: "m", RetryAfter: &durationpb.Duration{Seconds: 1, Nanos: -1}}},
			wantReason: ReasonInvalidFailure,
			wantErr:    []string{"error.retry_after is not a valid duration"},
		},
		"if a child is invalid, the event is InvalidDesiredChildren": {
			resp:       &polyopv1alpha1.ReconcileResponse{DesiredChildren: [][]byte{[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)}},
			wantReason: ReasonInvalidDesiredChildren,
			wantErr:    []string{"not a kind the controller owns"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse { return tc.resp })}
			r, _, w := newFlow(t, "", sc, ownerMap())
			rec := events.NewFakeRecorder(10)
			r.Recorder = rec
			r.MaxObjectSize = 1000
			_, err := r.Reconcile(context.Background(), req)
			if err == nil {
				t.Fatal("Reconcile succeeded, want an error")
			}
			if errors.Is(err, reconcile.TerminalError(nil)) {
				t.Errorf("error %v is terminal, want it retried with backoff", err)
			}
			for _, want := range append(tc.wantErr, `ConfigMap ns/o: controller "maps" refused the Reconcile answer of the sidecar at fake and wrote nothing`) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error = %q, want it to contain %q", err, want)
				}
			}
			if got := w.take(); len(got) > 0 {
				t.Errorf("writes = %v, want none", got)
			}
			select {
			case e := <-rec.Events:
				if !strings.HasPrefix(e, "Warning "+tc.wantReason+" ") || !strings.Contains(e, tc.wantErr[0]) {
					t.Errorf("event = %q, want a Warning %s naming %q", e, tc.wantReason, tc.wantErr[0])
				}
			default:
				t.Error("no event recorded")
			}
			select {
			case e := <-rec.Events:
				t.Errorf("a refused answer recorded %q too, want its events left out", e)
			default:
			}
		})
	}
}

func TestSameStatus(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		current, status string
		want            bool
	}{
		"if the object has no status, an empty one is the same":                             {current: "", status: `{}`, want: true},
		"if the object has no status, a non-empty one is not":                               {current: "", status: `{"a":1}`},
		"if the object has an empty status, an empty one is the same":                       {current: `{ }`, status: `{}`, want: true},
		"if the keys are in another order, it is the same":                                  {current: `{"b":[1,{"y":2,"x":1}],"a":"s"}`, status: `{"a":"s", "b":[1, {"x":1,"y":2}]}`, want: true},
		"if a string is escaped otherwise, it is the same":                                  {current: `{"a":"é<"}`, status: `{"a":"\u00e9\u003c"}`, want: true},
		"if a number is written otherwise, it is the same":                                  {current: `{"a":1.5,"b":100}`, status: `{"a":1.50,"b":1e2}`, want: true},
		"if a value differs, it is not the same":                                            {current: `{"a":{"b":1}}`, status: `{"a":{"b":2}}`},
		"if a list is in another order, it is not the same":                                 {current: `{"a":[1,2]}`, status: `{"a":[2,1]}`},
		"if the status has a field more, it is not the same":                                {current: `{"a":1}`, status: `{"a":1,"b":null}`},
		"if big integers differ beyond a float's precision, they differ":                    {current: `{"a":9007199254740993}`, status: `{"a":9007199254740992}`},
		"if the sidecar sends 1.0 where the API server stored 1, it is the same":            {current: `{"ratio":1,"list":[{"n":2}]}`, status: `{"ratio":1.0,"list":[{"n":2.0}]}`, want: true},
		"if a whole number is beyond a float's precision, it is not the float it rounds to": {current: `{"n":9007199254740993}`, status: `{"n":9007199254740992.0}`},
		"if a key is given twice, the last counts, as the API server keeps it":              {current: `{"a":2}`, status: `{"a":1,"a":2}`, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var current []byte
			if tc.current != "" {
				current = []byte(tc.current)
			}
			if got := compareStatus(current, []byte(tc.status)).same; got != tc.want {
				t.Errorf("compareStatus(%s, %s) = %v, want %v", tc.current, tc.status, got, tc.want)
			}
		})
	}
}

func TestStatusPatchIsAJSONPatch(t *testing.T) {
	t.Parallel()
	var ops []map[string]any
	if err := json.Unmarshal(statusPatch(`12"3`, []byte(`{"a":1}`)), &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0]["value"] != `12"3` || ops[1]["path"] != "/status" || ops[1]["value"].(map[string]any)["a"] != 1.0 {
		t.Errorf("patch = %v", ops)
	}
}

func TestStatusAsWritten(t *testing.T) {
	t.Parallel()
	r := NewReconciler(description.Controller{Name: "maps", GVK: configMapGVK}, nil, &fakesidecar.Fake{}, ReconcilerOptions{})
	at := func(rv, status string) *object.Object {
		o := asObject(t, ownerMap())
		o.SetResourceVersion(rv)
		if status != "" {
			u, err := o.Unstructured()
			if err != nil {
				t.Fatal(err)
			}
			u.Object["status"] = json.RawMessage(status)
			o = asObject(t, u)
		}
		return o
	}
	// The host sent {"a":1,"b":2} and the API server stored {"a":1}, at 7.
	sent, ok := statusHash([]byte(`{"b":2,"a":1}`))
	if !ok {
		t.Fatal("the status sent has no hash")
	}
	r.rememberStatus(at("7", `{"a":1}`), sent, ok)
	for name, tc := range map[string]struct {
		obj    *object.Object
		status string
		want   bool
	}{
		"if the object holds what the write stored, then the same status is not written":       {at("9", `{"a":1}`), `{"a":1,"b":2}`, true},
		"if the cache is older than the write, then the same status is not written":            {at("5", `{"a":0}`), `{"a":1,"b":2}`, true},
		"if someone else changed the status since, then it is written":                         {at("9", `{"a":3}`), `{"a":1,"b":2}`, false},
		"if the sidecar answers another status, then it is written, even over a stale cache":   {at("5", `{"a":1}`), `{"a":1,"b":3}`, false},
		"if the sidecar answers another status, then it is written over what the write stored": {at("9", `{"a":1}`), `{"a":2}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			current, _ := tc.obj.Field("status")
			if got := r.statusAsWritten(tc.obj, compareStatus(current, []byte(tc.status))); got != tc.want {
				t.Errorf("statusAsWritten = %v, want %v", got, tc.want)
			}
		})
	}
}
