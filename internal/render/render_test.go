package render

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// widgetKind is the kind the fake sidecar of these tests reconciles.
var widgetKind = &polyopv1alpha1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// fakeDescription declares one controller of Widget, which owns ConfigMaps
// (sent as observed) and Secrets (not sent), with a finalizer, and a
// defaulting and validating webhook of Widget.
func fakeDescription(context.Context, *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error) {
	return &polyopv1alpha1.DescribeResponse{
		ProtocolVersion: polyopv1alpha1.ProtocolVersion_PROTOCOL_VERSION_V1ALPHA1,
		Name:            "widgets",
		Controllers: []*polyopv1alpha1.ControllerDescription{{
			Name:    "widget",
			ForKind: widgetKind,
			Owns: []*polyopv1alpha1.OwnedKind{
				{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, SendObserved: true},
				{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"}},
			},
			Finalizer: "example.com/cleanup",
		}},
		Webhooks: []*polyopv1alpha1.WebhookDescription{{Kind: widgetKind, Default: true, Validate: true}},
	}, nil
}

const widgetYAML = `# a widget
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
spec:
  size: 3
`

// writeFile writes content to name in a temporary directory and returns its
// path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// render runs Render against f with the options o (its SidecarAddress set to
// f's) and returns what it printed.
func render(t *testing.T, f *fakesidecar.Fake, o RenderOptions) (string, string, error) {
	t.Helper()
	if f.OnDescribe == nil {
		f.OnDescribe = fakeDescription
	}
	o.SidecarAddress, _ = fakesidecar.Serve(t, f)
	if o.Output == "" {
		o.Output = "yaml"
	}
	o.Timeout, o.StartTimeout = 30*time.Second, 30*time.Second
	var out, errOut bytes.Buffer
	err := Render(context.Background(), o, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestRenderSendsTheObjectAndItsObservedChildrenAsTheHostWould(t *testing.T) {
	t.Parallel()
	f := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
		return &polyopv1alpha1.ReconcileResponse{
			RequeueAfter:     durationpb.New(90 * time.Second),
			Status:           []byte(`{"phase":"Ready","observedGeneration":1}`),
			DesiredChildren:  [][]byte{[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w-config"},"data":{"size":"3"}}`)},
			ChildrenComplete: true,
			Events:           []*polyopv1alpha1.Event{{Type: polyopv1alpha1.EventType_EVENT_TYPE_NORMAL, Reason: "Configured", Message: "wrote w-config"}},
		}
	})}
	observed := writeFile(t, "observed.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: w-config
data:
  size: "2"
---
apiVersion: v1
kind: Secret
metadata:
  name: w-secret
`)
	out, errOut, err := render(t, f, RenderOptions{ObjectFile: writeFile(t, "w.yaml", widgetYAML), ObservedFile: observed})
	if err != nil {
		t.Fatalf("render: %v", err)
	}

	if d := f.Describes(); len(d) != 1 || !strings.HasPrefix(d[0].GetClusterAddress(), "unix://") {
		t.Errorf("Describe requests = %v, want one, announcing render's Cluster service on a unix socket", d)
	}
	reqs := f.Reconciles()
	if len(reqs) != 1 {
		t.Fatalf("got %d Reconcile calls, want 1", len(reqs))
	}
	req := reqs[0]
	if req.GetController() != "widget" || req.GetKey().GetNamespace() != "default" || req.GetKey().GetName() != "w" {
		t.Errorf("request for controller %q, key %v; want widget, default/w", req.GetController(), req.GetKey())
	}
	var obj struct {
		Metadata struct {
			Namespace  string   `json:"namespace"`
			Generation int64    `json:"generation"`
			Finalizers []string `json:"finalizers"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.GetObject(), &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Metadata.Namespace != "default" || obj.Metadata.Generation != 1 || len(obj.Metadata.Finalizers) != 1 || obj.Metadata.Finalizers[0] != "example.com/cleanup" {
		t.Errorf("object sent = %s; want it in namespace default, at generation 1, with the controller's finalizer", req.GetObject())
	}
	if len(req.GetObservedChildren()) != 1 || !strings.Contains(string(req.GetObservedChildren()[0]), `"w-config"`) {
		t.Errorf("observed children sent = %q; want the ConfigMap alone (Secrets are owned without send_observed)", req.GetObservedChildren())
	}
	if !strings.Contains(errOut, `not sending Secret "w-secret"`) {
		t.Errorf("stderr = %q; want a note that the Secret is not sent", errOut)
	}

	want := `sidecar: widgets
controller: widget
object: Widget default/w
reconcile:
  requeueAfter: 1m30s
  status:
    phase: Ready
    observedGeneration: 1
  desiredChildren:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: w-config
    data:
      size: "3"
  childrenComplete: true
  events:
  - type: Normal
    reason: Configured
    message: wrote w-config
`
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}

func TestRenderPrintsAFailureAsPartOfTheAnswer(t *testing.T) {
	t.Parallel()
	f := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
		return &polyopv1alpha1.ReconcileResponse{Error: &polyopv1alpha1.Failure{Message: "the backend is down", RetryAfter: durationpb.New(5 * time.Second)}}
	})}
	out, _, err := render(t, f, RenderOptions{ObjectFile: writeFile(t, "w.yaml", widgetYAML), Output: "json"})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var got RenderResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if f := got.Reconcile.Failure; f == nil || f.Message != "the backend is down" || f.RetryAfter != "5s" || f.Terminal {
		t.Errorf("failure = %+v; want the sidecar's message, retried after 5s", got.Reconcile.Failure)
	}
}

func TestRenderRefusesAnAnswerTheHostWouldRefuse(t *testing.T) {
	t.Parallel()
	f := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
		return &polyopv1alpha1.ReconcileResponse{
			Status:          []byte(`"Ready"`),
			DesiredChildren: [][]byte{[]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"w"}}`)},
		}
	})}
	out, _, err := render(t, f, RenderOptions{ObjectFile: writeFile(t, "w.yaml", widgetYAML)})
	if err == nil {
		t.Fatalf("render accepted the answer and printed:\n%s", out)
	}
	for _, want := range []string{
		`controller "widget" answered the Reconcile of Widget default/w, but the host would refuse this answer`,
		"status that is not a JSON object",
		"Deployment.apps/v1 is not a kind the controller owns (it owns ConfigMap.v1, Secret.v1)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if out != "" {
		t.Errorf("render printed %q beside the error; want nothing", out)
	}
}

func TestRenderChoosesTheController(t *testing.T) {
	t.Parallel()
	gadget := writeFile(t, "g.yaml", "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n")
	for name, tc := range map[string]struct {
		object, controller, wantErr string
	}{
		"if no controller reconciles the kind, the error names the kinds the sidecar reconciles": {
			object:  gadget,
			wantErr: `sidecar "widgets" has no controller for Gadget.example.com/v1: it reconciles Widget.example.com/v1 (controller "widget")`,
		},
		"if --controller names no controller, the error names the controllers": {
			controller: "gizmo",
			wantErr:    `sidecar "widgets" has no controller "gizmo": its controllers are widget`,
		},
		"if --controller names a controller of another kind, the error says which": {
			object:     gadget,
			controller: "widget",
			wantErr:    `controller "widget" of sidecar "widgets" reconciles Widget.example.com/v1, not Gadget.example.com/v1`,
		},
		"if --controller names the controller, it is called": {controller: "widget"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if tc.object == "" {
				tc.object = writeFile(t, "w.yaml", widgetYAML)
			}
			f := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
				return &polyopv1alpha1.ReconcileResponse{}
			})}
			_, _, err := render(t, f, RenderOptions{ObjectFile: tc.object, Controller: tc.controller})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("render: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v; want %q", err, tc.wantErr)
			case tc.wantErr != "" && len(f.Reconciles()) > 0:
				t.Errorf("the sidecar was called %d times; want no Reconcile", len(f.Reconciles()))
			}
		})
	}
}

func TestRenderObservedChildOfAKindNotOwnedIsAnErrorNamingTheFileAndLine(t *testing.T) {
	t.Parallel()
	observed := writeFile(t, "observed.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n")
	f := &fakesidecar.Fake{}
	_, _, err := render(t, f, RenderOptions{ObjectFile: writeFile(t, "w.yaml", widgetYAML), ObservedFile: observed})
	want := observed + `:6: Deployment.apps/v1 "d" is not of a kind controller "widget" owns (it owns ConfigMap.v1, Secret.v1)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v; want %q", err, want)
	}
}

func TestRenderAdmitsTheObjectBeforeReconcilingIt(t *testing.T) {
	t.Parallel()
	f := &fakesidecar.Fake{
		OnDefault: fakesidecar.Answer(func(req *polyopv1alpha1.DefaultRequest) *polyopv1alpha1.DefaultResponse {
			var obj map[string]any
			_ = json.Unmarshal(req.GetRequest().GetObject(), &obj)
			obj["spec"].(map[string]any)["color"] = "blue"
			raw, _ := json.Marshal(obj)
			return &polyopv1alpha1.DefaultResponse{Object: raw, Warnings: []string{"color defaulted"}}
		}),
		OnValidate: fakesidecar.Answer(func(req *polyopv1alpha1.ValidateRequest) *polyopv1alpha1.ValidateResponse {
			if strings.Contains(string(req.GetRequest().GetObject()), `"size":3`) {
				return &polyopv1alpha1.ValidateResponse{}
			}
			return &polyopv1alpha1.ValidateResponse{Denied: &polyopv1alpha1.Denial{FieldErrors: []*polyopv1alpha1.FieldError{{
				Field: "spec.size", Type: polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_INVALID, BadValue: []byte("7"), Detail: "must be at most 5",
			}}}}
		}),
		OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
			return &polyopv1alpha1.ReconcileResponse{}
		}),
	}
	out, _, err := render(t, f, RenderOptions{ObjectFile: writeFile(t, "w.yaml", widgetYAML), Admission: "create"})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, want := range []string{"operation: CREATE", "warnings:\n    - color defaulted", "path: /spec/color", "validate:\n    allowed: true", "controller: widget"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}
	if defaulted := out[strings.Index(out, "defaulted:"):strings.Index(out, "validate:")]; strings.Contains(defaulted, "example.com/cleanup") {
		t.Errorf("the defaulted object shows the finalizer the reconcile added after it:\n%s", defaulted)
	}
	if reqs := f.Reconciles(); len(reqs) != 1 || !strings.Contains(string(reqs[0].GetObject()), `"color":"blue"`) {
		t.Errorf("Reconcile requests = %v; want one, of the defaulted object", reqs)
	}

	// An invalid object is denied with the status the API server returns,
	// and not reconciled.
	f2 := &fakesidecar.Fake{OnDefault: f.OnDefault, OnValidate: f.OnValidate, OnReconcile: f.OnReconcile}
	invalid := strings.Replace(widgetYAML, "size: 3", "size: 7", 1)
	out, _, err = render(t, f2, RenderOptions{ObjectFile: writeFile(t, "w.yaml", invalid), Admission: "create"})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, want := range []string{
		"allowed: false",
		"code: 422",
		"reason: Invalid",
		`message: 'Widget.example.com "w" is invalid: spec.size: Invalid value: 7: must be at most 5'`,
		"field: spec.size",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "reconcile:") || len(f2.Reconciles()) != 0 {
		t.Errorf("a denied object was reconciled:\n%s", out)
	}
}

func TestRenderPicksTheObjectOfAKindTheSidecarReconciles(t *testing.T) {
	t.Parallel()
	f := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
		return &polyopv1alpha1.ReconcileResponse{}
	})}
	path := writeFile(t, "sample.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: content\n---\n"+widgetYAML)
	out, errOut, err := render(t, f, RenderOptions{ObjectFile: path})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if !strings.Contains(out, "object: Widget default/w") {
		t.Errorf("rendered:\n%s\nwant the Widget", out)
	}
	if want := `rendering Widget "w" (` + path + `:6), the one object of ` + path + ` the sidecar reconciles; not ConfigMap "content" (line 1)`; !strings.Contains(errOut, want) {
		t.Errorf("stderr = %q; want %q", errOut, want)
	}

	two := writeFile(t, "two.yaml", widgetYAML+"---\n"+strings.Replace(widgetYAML, "name: w", "name: w2", 1))
	_, _, err = render(t, &fakesidecar.Fake{}, RenderOptions{ObjectFile: two})
	if want := two + ` holds 2 objects the sidecar reconciles (Widget "w" (line 1), Widget "w2" (line 9)): render takes one`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v; want %q", err, want)
	}
}
