package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/polyop/polyop/internal/admission"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

const widgetJSON = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"namespace":"ns","name":"w"},"spec":{"size":1}}`

func widgetWebhook(policy polyopv1alpha1.FailurePolicy) description.Webhook {
	return description.Webhook{GVK: widgetGVK, Default: true, Validate: true, FailurePolicy: policy, TimeoutSeconds: 10}
}

var opts = admission.Options{SidecarName: "widgets", SidecarAddress: "unix:///run/widgets.sock"}

// review sends req to h as the API server would and returns the response.
func review(t *testing.T, h http.Handler, req admissionv1.AdmissionRequest, query string) *admissionv1.AdmissionResponse {
	t.Helper()
	if req.UID == "" {
		req.UID = "uid-1"
	}
	if req.Kind.Kind == "" {
		req.Kind = metav1.GroupVersionKind{Group: widgetGVK.Group, Version: widgetGVK.Version, Kind: widgetGVK.Kind}
	}
	if req.Operation == "" {
		req.Operation = admissionv1.Create
	}
	if req.Object.Raw == nil && req.Operation != admissionv1.Delete {
		req.Object = runtime.RawExtension{Raw: []byte(widgetJSON)}
	}
	req.Namespace, req.Name = "ns", "w"
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/webhook"+query, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("the webhook answered no AdmissionReview: %v\n%s", err, w.Body.String())
	}
	if out.Response.UID != req.UID {
		t.Errorf("response UID %q, want %q", out.Response.UID, req.UID)
	}
	return out.Response
}

func defaulted(obj string, warnings ...string) func(context.Context, *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
	return func(context.Context, *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
		return &polyopv1alpha1.DefaultResponse{Object: []byte(obj), Warnings: warnings}, nil
	}
}

func failing(code codes.Code, msg string) func(context.Context, *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
	return func(context.Context, *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
		return nil, status.Error(code, msg)
	}
}

func TestDefaultingWebhook(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		answer      func(context.Context, *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error)
		policy      polyopv1alpha1.FailurePolicy
		wantAllowed bool
		wantPatch   string
		wantCode    int32
		wantMessage string
		wantWarning string
	}{
		"if the sidecar adds a field, then the patch adds it": {
			answer:      defaulted(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"namespace":"ns","name":"w","labels":{"team":"a"}},"spec":{"size":1}}`, "defaulted"),
			wantAllowed: true,
			wantPatch:   `[{"op":"add","path":"/metadata/labels","value":{"team":"a"}}]`,
			wantWarning: "defaulted",
		},
		"if the sidecar changes nothing, then there is no patch": {
			answer:      defaulted(""),
			wantAllowed: true,
		},
		"if the sidecar denies with field errors, then the answer is 422 Invalid": {
			answer: func(context.Context, *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
				return &polyopv1alpha1.DefaultResponse{Denied: &polyopv1alpha1.Denial{FieldErrors: []*polyopv1alpha1.FieldError{
					{Field: "spec.size", Type: polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_INVALID, BadValue: []byte(`1`), Detail: "too small"},
				}}}, nil
			},
			wantCode:    422,
			wantMessage: `Widget.example.com "w" is invalid: spec.size: Invalid value: 1: too small`,
		},
		"if the sidecar denies with a code, then the answer carries it": {
			answer: func(context.Context, *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
				return &polyopv1alpha1.DefaultResponse{Denied: &polyopv1alpha1.Denial{Message: "the size is taken", Code: 409}}, nil
			},
			wantCode:    409,
			wantMessage: "the size is taken",
		},
		"if the sidecar denies with a code that is no HTTP error, then the request is denied naming the sidecar": {
			answer: func(context.Context, *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
				return &polyopv1alpha1.DefaultResponse{Denied: &polyopv1alpha1.Denial{Message: "fine", Code: 200}}, nil
			},
			wantCode:    500,
			wantMessage: `sidecar "widgets" could not default Widget ns/w: it answered with a denial that has code 200, which is no HTTP error code (want 400 to 599, or 0 for the default)`,
		},
		"if the answer is not JSON, then the request is denied naming the sidecar": {
			answer:      defaulted(`{"apiVersion":`),
			wantCode:    500,
			wantMessage: `sidecar "widgets" could not default Widget ns/w: it answered with a defaulted object that is not valid JSON`,
		},
		"if the answer is not an object, then the request is denied": {
			answer:      defaulted(`["a"]`),
			wantCode:    500,
			wantMessage: "it answered with a defaulted object that is not a JSON object",
		},
		"if the answer renames the object, then the request is denied": {
			answer:      defaulted(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"namespace":"other","name":"x"}}`),
			wantCode:    500,
			wantMessage: `it changes metadata.namespace from "ns" to "other" and metadata.name from "w" to "x"`,
		},
		"if the sidecar is unreachable, then the request is denied with 503": {
			answer:      failing(codes.Unavailable, "connection refused"),
			wantCode:    503,
			wantMessage: `sidecar "widgets" could not default Widget ns/w: it is unreachable at unix:///run/widgets.sock: connection refused`,
		},
		"if the sidecar is unreachable and the policy is Ignore, then the request is allowed with a warning": {
			answer:      failing(codes.Unavailable, "connection refused"),
			policy:      polyopv1alpha1.FailurePolicy_FAILURE_POLICY_IGNORE,
			wantAllowed: true,
			wantWarning: `sidecar "widgets" could not default Widget ns/w: it is unreachable at unix:///run/widgets.sock: connection refused (allowed: the webhook's failure policy is Ignore)`,
		},
		"if the sidecar does not answer in time, then the request is denied": {
			answer: func(ctx context.Context, _ *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
				<-ctx.Done()
				return nil, status.FromContextError(ctx.Err()).Err()
			},
			wantCode:    503,
			wantMessage: "it did not answer within",
		},
		"if the sidecar fails, then the request is denied with its message": {
			answer:      failing(codes.Internal, "panic: boom [recovered]"),
			wantCode:    500,
			wantMessage: "it failed (Internal): panic: boom [recovered]",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			policy := tc.policy
			if policy == 0 {
				policy = polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL
			}
			o := opts
			o.Timeout = 100 * time.Millisecond
			h := admission.NewDefaulting(&fakesidecar.Fake{OnDefault: tc.answer}, widgetWebhook(policy), o)
			resp := review(t, h, admissionv1.AdmissionRequest{}, "")
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if string(resp.Patch) != tc.wantPatch {
				t.Errorf("patch = %s, want %s", resp.Patch, tc.wantPatch)
			}
			if tc.wantCode != 0 && (resp.Result == nil || resp.Result.Code != tc.wantCode) {
				t.Errorf("result = %+v, want code %d", resp.Result, tc.wantCode)
			}
			if tc.wantMessage != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, tc.wantMessage)) {
				t.Errorf("result = %+v, want a message containing %q", resp.Result, tc.wantMessage)
			}
			if got := strings.Join(resp.Warnings, "\n"); got != tc.wantWarning {
				t.Errorf("warnings = %q, want %q", got, tc.wantWarning)
			}
		})
	}
}

func TestDefaultingWebhookSendsTheRequest(t *testing.T) {
	t.Parallel()
	var got *polyopv1alpha1.AdmissionRequest
	var deadline, called time.Time
	sc := &fakesidecar.Fake{OnDefault: func(ctx context.Context, req *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
		called = time.Now()
		got = req.GetRequest()
		deadline, _ = ctx.Deadline()
		return &polyopv1alpha1.DefaultResponse{}, nil
	}}
	h := admission.NewDefaulting(sc, widgetWebhook(polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL), opts)
	dryRun := true
	sent := time.Now()
	review(t, h, admissionv1.AdmissionRequest{
		Operation:   admissionv1.Update,
		OldObject:   runtime.RawExtension{Raw: []byte(widgetJSON)},
		DryRun:      &dryRun,
		Resource:    metav1.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		SubResource: "status",
	}, "?timeout=2s")
	if got.GetOperation() != polyopv1alpha1.Operation_OPERATION_UPDATE || !got.GetDryRun() || got.GetResource() != "widgets" || got.GetSubresource() != "status" ||
		got.GetKey().GetName() != "w" || got.GetKey().GetNamespace() != "ns" || string(got.GetOldObject()) != widgetJSON || string(got.GetObject()) != widgetJSON {
		t.Errorf("the sidecar got %v", got)
	}
	// The API server waits 2s: the sidecar gets 2s less a fifth, from a
	// moment between the review's sending and the sidecar's call (which a
	// busy machine may set apart).
	if deadline.Sub(called) > 1600*time.Millisecond || deadline.Sub(sent) < 1400*time.Millisecond {
		t.Errorf("the sidecar's deadline is %s after the review was sent and %s after the call, want about 1.6s",
			deadline.Sub(sent), deadline.Sub(called))
	}

	// A delete has nothing to default: the sidecar is not called.
	before := sc.Calls()
	resp := review(t, h, admissionv1.AdmissionRequest{Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: []byte(widgetJSON)}}, "")
	if !resp.Allowed || sc.Calls() != before {
		t.Errorf("a delete: allowed %v after %d calls", resp.Allowed, sc.Calls()-before)
	}
}

func TestValidatingWebhook(t *testing.T) {
	t.Parallel()
	answer := func(resp *polyopv1alpha1.ValidateResponse) *fakesidecar.Fake {
		return &fakesidecar.Fake{OnValidate: func(context.Context, *polyopv1alpha1.ValidateRequest) (*polyopv1alpha1.ValidateResponse, error) {
			return resp, nil
		}}
	}
	hook := widgetWebhook(polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL)

	resp := review(t, admission.NewValidating(answer(&polyopv1alpha1.ValidateResponse{Warnings: []string{"careful"}}), hook, opts), admissionv1.AdmissionRequest{}, "")
	if !resp.Allowed || strings.Join(resp.Warnings, ",") != "careful" {
		t.Errorf("an allowed request: %+v", resp)
	}

	resp = review(t, admission.NewValidating(answer(&polyopv1alpha1.ValidateResponse{
		Denied:   &polyopv1alpha1.Denial{Message: "not on Fridays"},
		Warnings: []string{"careful"},
	}), hook, opts), admissionv1.AdmissionRequest{}, "")
	if resp.Allowed || resp.Result.Code != 403 || resp.Result.Reason != metav1.StatusReasonForbidden || resp.Result.Message != "not on Fridays" || len(resp.Warnings) != 1 {
		t.Errorf("a denial without field errors: %+v", resp)
	}

	for name, tc := range map[string]struct {
		denial     *polyopv1alpha1.Denial
		wantCode   int32
		wantReason metav1.StatusReason
		wantCauses int
	}{
		"a code without a reason gets Kubernetes' reason for it": {
			denial:   &polyopv1alpha1.Denial{Message: "the name is taken", Code: 409},
			wantCode: 409, wantReason: metav1.StatusReasonConflict,
		},
		"a reason replaces the default one": {
			denial:   &polyopv1alpha1.Denial{Message: "the name is taken", Code: 409, Reason: "AlreadyExists"},
			wantCode: 409, wantReason: metav1.StatusReasonAlreadyExists,
		},
		"a code Kubernetes has no reason for gets none": {
			denial:   &polyopv1alpha1.Denial{Message: "teapot", Code: 418},
			wantCode: 418, wantReason: metav1.StatusReasonUnknown,
		},
		"field errors keep their causes under another code": {
			denial: &polyopv1alpha1.Denial{Code: 400, FieldErrors: []*polyopv1alpha1.FieldError{
				{Field: "spec.size", Type: polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_REQUIRED},
			}},
			wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantCauses: 1,
		},
		"a reason alone keeps the default code": {
			denial:   &polyopv1alpha1.Denial{Message: "quota", Reason: "QuotaExceeded"},
			wantCode: 403, wantReason: "QuotaExceeded",
		},
	} {
		resp := review(t, admission.NewValidating(answer(&polyopv1alpha1.ValidateResponse{Denied: tc.denial}), hook, opts), admissionv1.AdmissionRequest{}, "")
		if resp.Allowed || resp.Result.Code != tc.wantCode || resp.Result.Reason != tc.wantReason {
			t.Errorf("%s: %+v, want code %d and reason %q", name, resp.Result, tc.wantCode, tc.wantReason)
		}
		causes := 0
		if resp.Result.Details != nil {
			causes = len(resp.Result.Details.Causes)
		}
		if causes != tc.wantCauses {
			t.Errorf("%s: %d causes, want %d", name, causes, tc.wantCauses)
		}
	}

	// A kind the endpoint was not declared for.
	sc := answer(&polyopv1alpha1.ValidateResponse{})
	resp = review(t, admission.NewValidating(sc, hook, opts), admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
	}, "")
	if resp.Allowed || sc.Calls() != 0 || !strings.Contains(resp.Result.Message, "the endpoint for Widget.v1.example.com received a ConfigMap.v1") {
		t.Errorf("a kind not declared: %+v after %d calls", resp.Result, sc.Calls())
	}
}

func TestDeadline(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		apiServer, max, want time.Duration
	}{
		"if the flag is below the webhook's timeout, then the flag wins": {10 * time.Second, 3 * time.Second, 3 * time.Second},
		"if there is no flag, then a fifth of the timeout is kept":       {10 * time.Second, 0, 8 * time.Second},
		"if the timeout is short, then at least 250ms are kept":          {time.Second, 3 * time.Second, 750 * time.Millisecond},
		"if the timeout is tiny, then half of it is the deadline":        {200 * time.Millisecond, 0, 100 * time.Millisecond},
		"if the timeout is the longest, then the flag still caps it":     {30 * time.Second, 3 * time.Second, 3 * time.Second},
		"if the flag eats into the margin, then the margin is kept":      {30 * time.Second, 25 * time.Second, 24 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := admission.Deadline(tc.apiServer, tc.max); got != tc.want {
				t.Errorf("Deadline(%s, %s) = %s, want %s", tc.apiServer, tc.max, got, tc.want)
			}
		})
	}
}

// TestAReviewWithoutARequestIsABadRequest sends both webhooks an
// AdmissionReview without a request, or with an empty one: each answers 400
// with a message that says so, as controller-runtime answers a review it
// cannot decode, and does not call the sidecar.
func TestAReviewWithoutARequestIsABadRequest(t *testing.T) {
	t.Parallel()
	sc := &fakesidecar.Fake{
		OnDefault: defaulted(widgetJSON),
		OnValidate: func(context.Context, *polyopv1alpha1.ValidateRequest) (*polyopv1alpha1.ValidateResponse, error) {
			return nil, nil
		},
	}
	wh := widgetWebhook(polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL)
	for _, body := range []string{
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`,
	} {
		for name, h := range map[string]http.Handler{
			"defaulting": admission.NewDefaulting(sc, wh, opts),
			"validating": admission.NewValidating(sc, wh, opts),
		} {
			r := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.Result == nil {
				t.Fatalf("the %s webhook answered %s to %s: %v", name, w.Body.String(), body, err)
			}
			res := out.Response.Result
			if out.Response.Allowed || res.Code != http.StatusBadRequest || res.Message != "the AdmissionReview has no request, or a request without a uid: the API server sends the object to admit in request, with a uid" {
				t.Errorf("the %s webhook answered %s to %s, want a 400 saying the review has no request", name, w.Body.String(), body)
			}
		}
	}
	if sc.Calls() != 0 {
		t.Errorf("the sidecar was called %d times", sc.Calls())
	}
}

func TestADenialsMessageBesideFieldErrorsGoesToTheLogNotTheClient(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var logged []string
	h := admission.NewValidating(denyingSidecar{&polyopv1alpha1.Denial{
		Message: "the widget is wrong in several ways",
		FieldErrors: []*polyopv1alpha1.FieldError{
			{Field: "spec.size", Type: polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_INVALID, BadValue: []byte(`0`), Detail: "must be positive"},
		},
	}}, widgetWebhook(polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL), opts)
	h.LogConstructor = func(logr.Logger, *ctrladmission.Request) logr.Logger {
		return funcr.New(func(prefix, args string) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, args)
		}, funcr.Options{})
	}
	resp := review(t, h, admissionv1.AdmissionRequest{}, "")
	if want := `Widget.example.com "w" is invalid: spec.size: Invalid value: 0: must be positive`; resp.Allowed || resp.Result.Code != 422 || resp.Result.Message != want {
		t.Errorf("result = %+v, want 422 with the message %q", resp.Result, want)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, l := range logged {
		found = found || strings.Contains(l, `"message"="the widget is wrong in several ways"`) && strings.Contains(l, `"object"="ns/w"`)
	}
	if !found {
		t.Errorf("logged %q, want a line with the denial's message naming the object", logged)
	}
}

// denyingSidecar denies every Default and Validate with its Denial.
type denyingSidecar struct{ denial *polyopv1alpha1.Denial }

func (s denyingSidecar) Default(context.Context, *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
	return &polyopv1alpha1.DefaultResponse{Denied: s.denial}, nil
}

func (s denyingSidecar) Validate(context.Context, *polyopv1alpha1.ValidateRequest) (*polyopv1alpha1.ValidateResponse, error) {
	return &polyopv1alpha1.ValidateResponse{Denied: s.denial}, nil
}
