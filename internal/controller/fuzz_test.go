package controller

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// FuzzCheckStatus checks the host's reading of a sidecar's status: it is
// accepted exactly when it is a JSON object encoding/json decodes, its error
// quotes a bounded part of it, and it is the same (compareStatus) as the status
// the object holds once it is written, whatever the key order, escaping or
// spelling of numbers the API server gives it back in: an unchanged status
// causes no write.
func FuzzCheckStatus(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		` {"ready":true,"observedGeneration":3,"conditions":[{"type":"Ready","status":"True"}]} `,
		`{"n":9007199254740993,"big":18446744073709551616,"f":0.5,"e":1e21,"neg":-0}`,
		`{"ratio":1.0,"list":[{"n":2.0}]}`,
		`{"huge":1e400}`,
		`{"a":1,"a":2}`,
		`{"s":"\u00e9\ud83d\ude00","empty":{},"list":[],"null":null}`,
		"{\"bad\xff\":\"\xff\"}",
		`null`, `[]`, `"status"`, `1`, ``, `{`, `{"a":1}x`, `{"a":tru}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		err := checkStatus(raw)

		var want map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		isObject := json.Valid(raw) && bytes.TrimSpace(raw)[0] == '{'
		if isObject {
			if err := dec.Decode(&want); err != nil {
				t.Fatalf("status %q: %v", raw, err)
			}
		}
		if !isObject {
			if err == nil {
				t.Fatalf("status %q is not a JSON object, yet it was accepted", raw)
			}
			if !strings.HasPrefix(err.Error(), "the sidecar returned a status that is not") {
				t.Fatalf("status %q: error %q does not say what is wrong", raw, err)
			}
			// It quotes at most 200 bytes of the status, each at most 4
			// characters long once quoted (\xff).
			if limit := 1200; len(err.Error()) > limit {
				t.Fatalf("status %q: the error quotes %d bytes, more than %d", raw, len(err.Error()), limit)
			}
			return
		}
		if err != nil {
			t.Fatalf("status %q is a JSON object, yet it was refused: %v", raw, err)
		}

		// The object, once the status is written, holds it as the sidecar
		// sent it: the next reconcile finds the same status.
		obj := &object.Object{}
		doc := append(append([]byte(`{"apiVersion":"e2e.polyop.dev/v1","kind":"Widget","status":`), raw...), '}')
		if err := json.Unmarshal(doc, obj); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		current, _ := obj.Field("status")
		if !compareStatus(current, raw).same {
			t.Fatalf("status %q: the object's status %s is not the same", raw, current)
		}
		// Encoded again as the API server does (keys sorted, last of
		// duplicate keys kept, strings escaped its way), it is still the same.
		reencoded, err := json.Marshal(want)
		if err != nil {
			t.Fatalf("status %q: %v", raw, err)
		}
		if !compareStatus(reencoded, raw).same {
			t.Fatalf("status %q, encoded again as %s, is not the same", raw, reencoded)
		}
	})
}

// FuzzValidateChildren checks the validation of two desired children: what
// is not a JSON object is refused, naming its index; what is accepted is a
// JSON object of an owned kind, with a name, in the owner's namespace (none
// for a cluster-scoped kind), named once, without status or server-set
// metadata, with the owner as its one controller reference, and hashed as
// its canonical JSON; and a child as validated, sent back (as a sidecar does
// with an observed child), is accepted unchanged with the same hash.
func FuzzValidateChildren(f *testing.F) {
	kinds := []ChildKind{{GVK: configMapGVK, Namespaced: true}, {GVK: roleGVK}}
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`
	role := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"},"rules":[]}`
	for _, seed := range [][2]string{
		{cm, role},
		{cm, `{"kind":"ConfigMap","data":{"k":"v"},"apiVersion":"v1","metadata":{"name":"b","namespace":"ns"}}`},
		{cm, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns"}}`},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"5","uid":"u","managedFields":[{}],"generation":1,"creationTimestamp":"2026-01-01T00:00:00Z"},"status":{"x":1}}`, role},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"pod-uid"},{"apiVersion":"e2e.polyop.dev/v1","kind":"Widget","name":"w","uid":"owner-uid","controller":false}]}}`, role},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"pod-uid","controller":true}]}}`, role},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","ownerReferences":"x","labels":{"a":"b"}}}`, role},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"other"}}`, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r","namespace":"ns"}}`},
		{`{"apiVersion":"/v1","kind":"ConfigMap","metadata":{"name":"a"}}`, `{"apiVersion":"v1/","kind":"ConfigMap","metadata":{"name":"a"}}`},
		{`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"a-"}}`},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":"a"}`, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":1}}`},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"n":9007199254740993,"f":1e400}}`, role},
		{`[]`, `null`},
		{`{"apiVersion":`, `"x"`},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		raws := [][]byte{a, b}
		got, err := validateChildren(raws, owner(), "widget", kinds)
		for i, raw := range raws {
			var m map[string]any
			if json.Unmarshal(raw, &m) == nil && m != nil {
				continue
			}
			if err == nil {
				t.Fatalf("desired child %q is not a JSON object, yet the children were accepted", raw)
			}
			if want := "desired_children[" + string(rune('0'+i)) + "]"; !strings.Contains(err.Error(), want) {
				t.Fatalf("desired child %q is not a JSON object, yet the error does not name %s: %v", raw, want, err)
			}
		}
		if err != nil {
			if got != nil {
				t.Fatalf("children %v returned beside an error", got)
			}
			if !strings.HasPrefix(err.Error(), "the sidecar returned invalid desired children, so none was applied") {
				t.Fatalf("error %q does not say that nothing was applied", err)
			}
			return
		}
		if len(got) != len(raws) {
			t.Fatalf("%d children accepted of %d", len(got), len(raws))
		}
		if got[0].id == got[1].id {
			t.Fatalf("the child %s was accepted twice", got[0].id)
		}
		for i, c := range got {
			checkDesiredChild(t, raws[i], c, kinds)

			// Sent back as the host applies it, it is the same child.
			sent := c.raw
			back, err := validateChildren([][]byte{sent}, owner(), "widget", kinds)
			if err != nil {
				t.Fatalf("child %s, as validated, is refused when sent back: %v", sent, err)
			}
			if back[0].id != c.id || back[0].hash != c.hash || !equality.Semantic.DeepEqual(objectOf(t, back[0]).Object, objectOf(t, c).Object) {
				t.Fatalf("child %s, as validated, is another child when sent back: %s", sent, back[0].raw)
			}
		}
	})
}

// checkDesiredChild checks one validated child, raw as the sidecar sent it.
func checkDesiredChild(t *testing.T, raw []byte, c desiredChild, kinds []ChildKind) {
	t.Helper()
	u := objectOf(t, c)
	i := slices.IndexFunc(kinds, func(k ChildKind) bool { return k.GVK == u.GroupVersionKind() })
	if i < 0 {
		t.Fatalf("child %q accepted with kind %v, not an owned kind", raw, u.GroupVersionKind())
	}
	switch ns := u.GetNamespace(); {
	case u.GetName() == "":
		t.Fatalf("child %q accepted without a name", raw)
	case kinds[i].Namespaced && ns != owner().GetNamespace():
		t.Fatalf("child %q accepted in namespace %q, not its owner's", raw, ns)
	case !kinds[i].Namespaced && ns != "":
		t.Fatalf("cluster-scoped child %q accepted in namespace %q", raw, ns)
	}
	if c.id != idOf(u) {
		t.Fatalf("child %q accepted as %s, but it is %s", raw, c.id, idOf(u))
	}
	if _, ok := u.Object["status"]; ok {
		t.Fatalf("child %q accepted with its status", raw)
	}
	meta, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		t.Fatalf("child %q accepted with metadata %#v", raw, u.Object["metadata"])
	}
	for _, f := range serverSetMetadata {
		if _, ok := meta[f]; ok {
			t.Fatalf("child %q accepted with metadata.%s", raw, f)
		}
	}
	var controllers int
	for _, ref := range u.GetOwnerReferences() {
		if ptr.Deref(ref.Controller, false) {
			controllers++
			o := owner()
			if ref.UID != o.GetUID() || ref.Name != o.GetName() || ref.Kind != o.GetKind() || ref.APIVersion != o.GetAPIVersion() || !ptr.Deref(ref.BlockOwnerDeletion, false) {
				t.Fatalf("child %q accepted with controller %+v, not its owner", raw, ref)
			}
		}
	}
	if controllers != 1 {
		t.Fatalf("child %q accepted with %d controller references, want its owner's alone: %+v", raw, controllers, u.GetOwnerReferences())
	}
	canonical, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if c.hash != sha256.Sum256(canonical) {
		t.Fatalf("child %q: the hash is not its canonical JSON's", raw)
	}
	var content unstructured.Unstructured
	if err := content.UnmarshalJSON(canonical); err != nil {
		t.Fatalf("child %q accepted as %s, which the API machinery does not read: %v", raw, canonical, err)
	}
}

// FuzzDecide checks that the sidecar's decision maps onto controller-runtime's:
// a reported error is an error (terminal when the sidecar says so) and no
// requeue, with its retry_after when positive; a terminal error with a
// positive retry_after, or an invalid duration, is a transient error;
// otherwise no error, a positive requeue_after is kept, and the result never
// asks for a negative delay.
func FuzzDecide(f *testing.F) {
	f.Add(false, "", false, false, int64(0), int32(0), false, int64(0))
	f.Add(false, "", false, true, int64(90), int32(0), false, int64(0))
	f.Add(true, "boom", false, true, int64(1), int32(0), false, int64(0))
	f.Add(true, "busy", false, false, int64(0), int32(0), true, int64(2))
	f.Add(true, "busy", false, false, int64(0), int32(0), true, int64(-2))
	f.Add(true, "never", true, false, int64(0), int32(0), false, int64(0))
	f.Add(true, "never", true, false, int64(0), int32(0), true, int64(3))
	f.Add(true, "", false, false, int64(0), int32(0), true, int64(315576000001))
	f.Add(false, "", false, true, int64(1), int32(-5), false, int64(0))
	f.Add(false, "", false, true, int64(-5), int32(0), false, int64(0))
	f.Add(false, "", false, true, int64(0), int32(1), false, int64(0))
	f.Add(false, "", false, true, int64(315576000000), int32(999999999), false, int64(0))
	f.Add(false, "", false, true, int64(315576000001), int32(0), false, int64(0))
	f.Fuzz(func(t *testing.T, hasError bool, message string, terminal, hasRequeueAfter bool, seconds int64, nanos int32, hasRetryAfter bool, retrySeconds int64) {
		resp := &polyopv1alpha1.ReconcileResponse{}
		if hasError {
			resp.Error = &polyopv1alpha1.Failure{Message: message, Terminal: terminal}
			if hasRetryAfter {
				resp.Error.RetryAfter = &durationpb.Duration{Seconds: retrySeconds}
			}
		}
		if hasRequeueAfter {
			resp.RequeueAfter = &durationpb.Duration{Seconds: seconds, Nanos: nanos}
		}
		result, err := decide(resp)
		if result.RequeueAfter < 0 {
			t.Fatalf("%v: result %+v asks for a negative delay", resp, result)
		}
		retryAfter := resp.GetError().GetRetryAfter()
		switch {
		case hasError && retryAfter != nil && (retryAfter.CheckValid() != nil || terminal && retryAfter.AsDuration() > 0):
			if err == nil || errors.Is(err, reconcile.TerminalError(nil)) || !strings.Contains(err.Error(), "retry_after") {
				t.Fatalf("%v: a broken error gave %v; want a transient error naming retry_after", resp, err)
			}
			if result != (reconcile.Result{}) {
				t.Fatalf("%v: result %+v beside an error", resp, result)
			}
		case hasError:
			if err == nil || !strings.Contains(err.Error(), message) {
				t.Fatalf("%v: error %v, want the sidecar's %q", resp, err, message)
			}
			if errors.Is(err, reconcile.TerminalError(nil)) != terminal {
				t.Fatalf("%v: error %v is terminal: %v, want %v", resp, err, !terminal, terminal)
			}
			if result != (reconcile.Result{}) {
				t.Fatalf("%v: result %+v beside an error", resp, result)
			}
			var f *sidecarFailure
			want := time.Duration(0)
			if retryAfter.AsDuration() > 0 {
				want = retryAfter.AsDuration()
			}
			if !errors.As(err, &f) || f.retryAfter != want {
				t.Fatalf("%v: error %#v, want a retry after %s", resp, err, want)
			}
		case hasRequeueAfter && resp.GetRequeueAfter().CheckValid() != nil:
			if err == nil || errors.Is(err, reconcile.TerminalError(nil)) {
				t.Fatalf("%v: an invalid requeue_after gave result %+v, error %v; want a transient error", resp, result, err)
			}
		default:
			if err != nil {
				t.Fatalf("%v: error %v", resp, err)
			}
			want := reconcile.Result{}
			if d := resp.GetRequeueAfter().AsDuration(); hasRequeueAfter && d > 0 {
				want.RequeueAfter = d
			}
			if result != want {
				t.Fatalf("%v: result %+v, want %+v", resp, result, want)
			}
		}
	})
}
