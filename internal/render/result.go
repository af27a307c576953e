package render

import (
	"encoding/json"
	"io"

	yaml "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// RenderResult is what polyop render prints.
type RenderResult struct {
	// Sidecar is the sidecar's name, from its description.
	Sidecar string `json:"sidecar"`
	// Controller is the controller called; empty when none was.
	Controller string `json:"controller,omitempty"`
	// Object is the rendered object: kind, namespace and name.
	Object string `json:"object"`
	// Admission is the answer of the sidecar's webhooks, with --admission.
	Admission *AdmissionResult `json:"admission,omitempty"`
	// Reconcile is the answer of the Reconcile call; nil when none was made
	// (the object was denied, or deleted).
	Reconcile *ReconcileResult `json:"reconcile,omitempty"`
	// Writes are the writes the sidecar made through the Cluster service,
	// in order: recorded, not applied.
	Writes []Write `json:"writes,omitempty"`
}

// AdmissionResult is the answer of the sidecar's webhooks for one operation.
type AdmissionResult struct {
	// Operation is CREATE, UPDATE or DELETE.
	Operation string `json:"operation"`
	// Skipped says why no webhook was called, when none was.
	Skipped string `json:"skipped,omitempty"`
	// Default is the Default call's answer; nil when not called.
	Default *AdmissionCall `json:"default,omitempty"`
	// Defaulted is the object after the Default call's patch, when it
	// changed it.
	Defaulted map[string]any `json:"defaulted,omitempty"`
	// Validate is the Validate call's answer; nil when not called.
	Validate *AdmissionCall `json:"validate,omitempty"`
}

// AdmissionCall is the answer to one admission call, as the host gives it to
// the API server.
type AdmissionCall struct {
	// Allowed is whether the request is admitted.
	Allowed bool `json:"allowed"`
	// Warnings are shown to the client (kubectl prints them).
	Warnings []string `json:"warnings,omitempty"`
	// Patch is the JSON patch (RFC 6902) of a Default call that changed the
	// object.
	Patch []map[string]any `json:"patch,omitempty"`
	// Denied is what the API server returns for a refused request.
	Denied *Denial `json:"denied,omitempty"`
}

// Denial is the status of a refused admission request, as kubectl shows it.
type Denial struct {
	// Code is the HTTP status code: 422 for field errors, 403 otherwise,
	// unless the sidecar said another.
	Code int32 `json:"code"`
	// Reason is the status reason: Invalid, Forbidden, ...
	Reason metav1.StatusReason `json:"reason,omitempty"`
	// Message is the message kubectl prints.
	Message string `json:"message"`
	// Causes are the field errors.
	Causes []metav1.StatusCause `json:"causes,omitempty"`
}

func newAdmissionCall(resp ctrladmission.Response) *AdmissionCall {
	c := &AdmissionCall{Allowed: resp.Allowed, Warnings: resp.Warnings}
	if len(resp.Patch) > 0 {
		_ = json.Unmarshal(resp.Patch, &c.Patch)
	}
	if st := resp.Result; !resp.Allowed && st != nil {
		c.Denied = &Denial{Code: st.Code, Reason: st.Reason, Message: st.Message}
		if st.Details != nil {
			c.Denied.Causes = st.Details.Causes
		}
	}
	return c
}

// ReconcileResult is the answer of one Reconcile call.
type ReconcileResult struct {
	// RequeueAfter is when the host reconciles the object again, when the
	// sidecar asked.
	RequeueAfter string `json:"requeueAfter,omitempty"`
	// Failure is the error the sidecar reported, when it did.
	Failure *Failure `json:"failure,omitempty"`
	// Status is the status the host writes; nil when the sidecar returned
	// none (the host leaves the status as it is).
	Status json.RawMessage `json:"status,omitempty"`
	// DesiredChildren are the children the host applies, as the sidecar
	// returned them.
	DesiredChildren []json.RawMessage `json:"desiredChildren"`
	// ChildrenComplete says the desired children are all of them: the host
	// deletes the children it applied before that are not among them.
	ChildrenComplete bool `json:"childrenComplete"`
	// Events are the events the host records on the object.
	Events []Event `json:"events,omitempty"`
}

// Failure is a Reconcile's error.
type Failure struct {
	Message string `json:"message"`
	// Terminal failures are not retried until the object changes.
	Terminal bool `json:"terminal,omitempty"`
	// RetryAfter is when the host retries, instead of its backoff.
	RetryAfter string `json:"retryAfter,omitempty"`
}

// Event is an event the host records on the object.
type Event struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Action  string `json:"action,omitempty"`
	Message string `json:"message"`
}

// newReconcileResult is the result of a ReconcileResponse the host accepts.
func newReconcileResult(resp *polyopv1alpha1.ReconcileResponse) *ReconcileResult {
	r := &ReconcileResult{ChildrenComplete: resp.GetChildrenComplete(), DesiredChildren: []json.RawMessage{}}
	if d := resp.GetRequeueAfter(); d != nil && d.AsDuration() > 0 {
		r.RequeueAfter = d.AsDuration().String()
	}
	if f := resp.GetError(); f != nil {
		r.Failure = &Failure{Message: f.GetMessage(), Terminal: f.GetTerminal()}
		if d := f.GetRetryAfter(); d != nil && d.AsDuration() > 0 {
			r.Failure.RetryAfter = d.AsDuration().String()
		}
	}
	// Kept as the sidecar wrote them (CheckAnswer found them valid), in
	// its order of keys.
	if s := resp.GetStatus(); len(s) > 0 {
		r.Status = s
	}
	for _, c := range resp.GetDesiredChildren() {
		r.DesiredChildren = append(r.DesiredChildren, c)
	}
	for _, e := range resp.GetEvents() {
		t := "Normal"
		if e.GetType() == polyopv1alpha1.EventType_EVENT_TYPE_WARNING {
			t = "Warning"
		}
		r.Events = append(r.Events, Event{Type: t, Reason: e.GetReason(), Action: e.GetAction(), Message: e.GetMessage()})
	}
	return r
}

// refOf names obj: its kind, and namespace/name or name.
func refOf(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetKind() + " " + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// writeResult writes r as YAML or JSON. The YAML keeps the order of the
// JSON (the result's fields in the order they are declared, an object's
// fields as the sidecar sent them) rather than sorting keys.
func writeResult(out io.Writer, r *RenderResult, format string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if format == "json" {
		_, err = out.Write(append(b, '\n'))
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return err
	}
	blockStyle(&doc)
	enc := yaml.NewEncoder(out)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	return enc.Close()
}

// blockStyle clears the styles YAML gives JSON (flow mappings, quoted
// strings), so that n is written as block YAML, quoted only where needed.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}
