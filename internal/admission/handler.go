package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/polyop/polyop/internal/description"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Sidecar is the part of the host's sidecar client the handlers call;
// *sidecar.Client implements it.
type Sidecar interface {
	Default(ctx context.Context, req *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error)
	Validate(ctx context.Context, req *polyopv1alpha1.ValidateRequest) (*polyopv1alpha1.ValidateResponse, error)
}

// Options configure the handlers.
type Options struct {
	// SidecarName names the sidecar in denials and warnings. Required.
	SidecarName string
	// SidecarAddress is the sidecar's address, quoted when it cannot be
	// reached. Defaults to "".
	SidecarAddress string
	// Timeout caps the deadline of every call to the sidecar; the deadline is
	// also kept below the API server's timeout for the webhook (see
	// Deadline). Defaults to DefaultTimeout.
	Timeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// NewDefaulting returns the mutating webhook of wh, served by sc.
func NewDefaulting(sc Sidecar, wh description.Webhook, opts Options) *admission.Webhook {
	h := &handler{sc: sc, wh: wh, opts: opts.withDefaults(), verb: "default"}
	return &admission.Webhook{Handler: h.traced(h.handleDefault), WithContextFunc: WithAPIServerTimeout}
}

// NewValidating returns the validating webhook of wh, served by sc.
func NewValidating(sc Sidecar, wh description.Webhook, opts Options) *admission.Webhook {
	h := &handler{sc: sc, wh: wh, opts: opts.withDefaults(), verb: "validate"}
	return &admission.Webhook{Handler: h.traced(h.handleValidate), WithContextFunc: WithAPIServerTimeout}
}

// handler serves one webhook of one kind.
type handler struct {
	sc   Sidecar
	wh   description.Webhook
	opts Options
	verb string // "default" or "validate", for messages
}

func (h *handler) handleDefault(ctx context.Context, req admission.Request) admission.Response {
	if req.UID == "" {
		return noRequest(ctx)
	}
	// A delete has nothing to default, as in controller-runtime's defaulter.
	if req.Operation == admissionv1.Delete || req.Operation == admissionv1.Connect {
		return admission.Allowed("")
	}
	areq, resp, ok := h.request(ctx, req)
	if !ok {
		return resp
	}
	ctx, start, cancel := h.withDeadline(ctx)
	defer cancel()
	out, err := h.sc.Default(ctx, &polyopv1alpha1.DefaultRequest{Request: areq})
	if err != nil {
		return h.callFailed(ctx, req, err, time.Since(start))
	}
	if d := out.GetDenied(); d != nil {
		return h.denied(ctx, req, d, out.GetWarnings())
	}
	if len(out.GetObject()) == 0 {
		return admission.Allowed("").WithWarnings(out.GetWarnings()...)
	}
	if err := checkDefaulted(req, out.GetObject()); err != nil {
		return h.failure(ctx, req, http.StatusInternalServerError, fmt.Errorf("it answered with a defaulted object that %w", err))
	}
	patched := admission.PatchResponseFromRaw(req.Object.Raw, out.GetObject())
	if !patched.Allowed {
		return h.failure(ctx, req, http.StatusInternalServerError,
			fmt.Errorf("it answered with a defaulted object the host cannot diff: %s", patched.Result.Message))
	}
	return patched.WithWarnings(out.GetWarnings()...)
}

func (h *handler) handleValidate(ctx context.Context, req admission.Request) admission.Response {
	if req.UID == "" {
		return noRequest(ctx)
	}
	areq, resp, ok := h.request(ctx, req)
	if !ok {
		return resp
	}
	ctx, start, cancel := h.withDeadline(ctx)
	defer cancel()
	out, err := h.sc.Validate(ctx, &polyopv1alpha1.ValidateRequest{Request: areq})
	if err != nil {
		return h.callFailed(ctx, req, err, time.Since(start))
	}
	if d := out.GetDenied(); d != nil {
		return h.denied(ctx, req, d, out.GetWarnings())
	}
	return admission.Allowed("").WithWarnings(out.GetWarnings()...)
}

// noRequest is the answer to an AdmissionReview without a request, or with
// a request without a uid, which the API server always sends: a 400, as
// controller-runtime answers a review it cannot decode.
func noRequest(ctx context.Context) admission.Response {
	err := errors.New("the AdmissionReview has no request, or a request without a uid: the API server sends the object to admit in request, with a uid")
	logf.FromContext(ctx).Info("Refused an admission request", "reason", err.Error())
	return admission.Errored(http.StatusBadRequest, err)
}

// request builds the sidecar's request, or the response to give when the
// request is not for this webhook's kind.
func (h *handler) request(ctx context.Context, req admission.Request) (*polyopv1alpha1.AdmissionRequest, admission.Response, bool) {
	kind := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	if kind != h.wh.GVK {
		// The webhook configuration sends this endpoint a kind the sidecar
		// did not declare for it: it would not decode it.
		err := fmt.Errorf("the endpoint for %s received a %s: the webhook configuration's rules do not match what the sidecar declares (run host webhooks to print them)",
			gvkString(h.wh.GVK), gvkString(kind))
		return nil, h.failure(ctx, req, http.StatusInternalServerError, err), false
	}
	return NewRequest(req), admission.Response{}, true
}

// withDeadline gives ctx the deadline of one call to the sidecar, counted
// from start, so that a call cut off by it took at least the deadline.
func (h *handler) withDeadline(ctx context.Context) (_ context.Context, start time.Time, _ context.CancelFunc) {
	timeout := APIServerTimeout(ctx, time.Duration(h.wh.TimeoutSeconds)*time.Second)
	start = time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(Deadline(timeout, h.opts.Timeout)))
	return ctx, start, cancel
}

// callFailed is the response to a call that got no answer: the sidecar is
// unreachable, too slow, or answered with a gRPC error.
func (h *handler) callFailed(ctx context.Context, req admission.Request, err error, took time.Duration) admission.Response {
	st := status.Convert(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		return h.failure(ctx, req, http.StatusServiceUnavailable,
			fmt.Errorf("it did not answer within %s", took.Round(time.Millisecond)))
	case codes.Unavailable:
		where := ""
		if h.opts.SidecarAddress != "" {
			where = " at " + h.opts.SidecarAddress
		}
		return h.failure(ctx, req, http.StatusServiceUnavailable, fmt.Errorf("it is unreachable%s: %s", where, st.Message()))
	case codes.Canceled:
		return h.failure(ctx, req, http.StatusServiceUnavailable, errors.New("the call was canceled: the API server gave up on the request"))
	case codes.Unimplemented:
		return h.failure(ctx, req, http.StatusInternalServerError,
			fmt.Errorf("it does not implement %s: %s", methodName(h.verb), st.Message()))
	default:
		return h.failure(ctx, req, http.StatusInternalServerError, fmt.Errorf("it failed (%s): %s", st.Code(), st.Message()))
	}
}

// denied is the response to the sidecar's denial d, or the failure to give
// when d is broken.
func (h *handler) denied(ctx context.Context, req admission.Request, d *polyopv1alpha1.Denial, warnings []string) admission.Response {
	resp, err := Denied(h.wh.GVK.GroupKind(), req.Name, d)
	if err != nil {
		return h.failure(ctx, req, http.StatusInternalServerError, fmt.Errorf("it answered with a denial that %w", err))
	}
	if d.GetMessage() != "" && len(d.GetFieldErrors()) > 0 {
		// The client sees the Invalid message built from the field errors, as
		// for the API server's own validation: the sidecar's message is for
		// the log only.
		logf.FromContext(ctx).Info("The sidecar denied the request with field errors; its message is logged, not shown to the client",
			"sidecar", h.opts.SidecarName, "webhook", h.verb, "kind", req.Kind.Kind, "object", objectRef(req), "message", d.GetMessage())
	}
	return resp.WithWarnings(warnings...)
}

// failure denies the request with a message naming the sidecar and what went
// wrong, or allows it with a warning saying so when the webhook declared
// failurePolicy Ignore.
func (h *handler) failure(ctx context.Context, req admission.Request, code int32, err error) admission.Response {
	msg := fmt.Sprintf("sidecar %q could not %s %s %s: %v", h.opts.SidecarName, h.verb, req.Kind.Kind, objectRef(req), err)
	log := logf.FromContext(ctx)
	if h.wh.FailurePolicy == polyopv1alpha1.FailurePolicy_FAILURE_POLICY_IGNORE {
		log.Info("Admission call failed; allowing the request, as the webhook's failure policy is Ignore", "reason", msg)
		return admission.Allowed("").WithWarnings(msg + " (allowed: the webhook's failure policy is Ignore)")
	}
	log.Info("Admission call failed; denying the request", "reason", msg)
	return failed(code, msg)
}

// checkDefaulted checks that the sidecar's defaulted object is a JSON object
// and still the object under admission: same apiVersion, kind, namespace and
// name. It compares with what the request says of the object, and reads the
// object the API server sent only to explain a difference.
func checkDefaulted(req admission.Request, defaulted []byte) error {
	var after identity
	if err := json.Unmarshal(defaulted, &after); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return errors.New("is not valid JSON")
		}
		return fmt.Errorf("is not a JSON object: %w", err)
	}
	before := identity{
		APIVersion: schema.GroupVersion{Group: req.Kind.Group, Version: req.Kind.Version}.String(),
		Kind:       req.Kind.Kind,
	}
	before.Metadata.Namespace, before.Metadata.Name = req.Namespace, req.Name
	if after == before {
		return nil
	}
	if err := json.Unmarshal(req.Object.Raw, &before); err != nil {
		return fmt.Errorf("cannot be compared with the object sent: %w", err)
	}
	var changed []string
	for _, f := range []struct{ name, was, is string }{
		{"apiVersion", before.APIVersion, after.APIVersion},
		{"kind", before.Kind, after.Kind},
		{"metadata.namespace", before.Metadata.Namespace, after.Metadata.Namespace},
		{"metadata.name", before.Metadata.Name, after.Metadata.Name},
	} {
		if f.was != f.is {
			changed = append(changed, fmt.Sprintf("%s from %q to %q", f.name, f.was, f.is))
		}
	}
	if len(changed) > 0 {
		return fmt.Errorf("is another object: it changes %s", joinList(changed))
	}
	return nil
}

// identity is what makes an object the same object.
type identity struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
}

func objectRef(req admission.Request) string {
	name := req.Name
	if name == "" {
		name = "(generated name)"
	}
	if req.Namespace != "" {
		return req.Namespace + "/" + name
	}
	return name
}

func methodName(verb string) string {
	if verb == "default" {
		return "Default"
	}
	return "Validate"
}

func joinList(items []string) string {
	switch len(items) {
	case 1:
		return items[0]
	case 2:
		return items[0] + " and " + items[1]
	}
	out := ""
	for i, s := range items {
		switch {
		case i == len(items)-1:
			out += ", and " + s
		case i > 0:
			out += ", " + s
		default:
			out = s
		}
	}
	return out
}

func gvkString(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind + "." + gvk.Version
	}
	return gvk.Kind + "." + gvk.Version + "." + gvk.Group
}
