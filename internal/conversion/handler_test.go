package conversion_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyop/polyop/internal/conversion"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

var widgets = []description.Conversion{{GroupKind: schema.GroupKind{Group: "example.com", Kind: "Widget"}, Versions: []string{"v1", "v2"}}}

func widget(version, name string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"example.com/%s","kind":"Widget","metadata":{"namespace":"ns","name":%q,"uid":"u-%s"},"spec":{}}`, version, name, name))
}

// relabel answers every object at the desired version, otherwise unchanged.
func relabel(_ context.Context, req *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
	out := &polyopv1alpha1.ConvertResponse{}
	for _, o := range req.GetObjects() {
		var m map[string]any
		if err := json.Unmarshal(o, &m); err != nil {
			return nil, err
		}
		m["apiVersion"] = req.GetDesiredApiVersion()
		data, _ := json.Marshal(m)
		out.Objects = append(out.Objects, data)
	}
	return out, nil
}

func convert(t *testing.T, sc *fakesidecar.Fake, desired string, query string, objects ...[]byte) *apiextensionsv1.ConversionResponse {
	t.Helper()
	review := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: "uid-1", DesiredAPIVersion: desired},
	}
	for _, o := range objects {
		review.Request.Objects = append(review.Request.Objects, runtime.RawExtension{Raw: o})
	}
	body, _ := json.Marshal(review)
	h := conversion.NewHandler(sc, widgets, conversion.Options{SidecarName: "widgets", SidecarAddress: "unix:///run/w.sock", Timeout: 200 * time.Millisecond})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, conversion.Path+query, bytes.NewReader(body)))
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("no ConversionReview in the answer: %v\n%s", err, w.Body.String())
	}
	if out.APIVersion != "apiextensions.k8s.io/v1" || out.Kind != "ConversionReview" || out.Response.UID != "uid-1" {
		t.Errorf("the answer is %s %s for %s", out.APIVersion, out.Kind, out.Response.UID)
	}
	return out.Response
}

func TestConversion(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		answer      func(context.Context, *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error)
		desired     string
		objects     [][]byte
		wantMessage string // "" for success
		wantCalls   int
	}{
		"if the sidecar converts every object, then the review succeeds": {
			answer: relabel, desired: "example.com/v2", objects: [][]byte{widget("v1", "a"), widget("v1", "b")}, wantCalls: 1,
		},
		"if the sidecar reports an error, then the review fails with it": {
			answer: func(context.Context, *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
				return &polyopv1alpha1.ConvertResponse{Error: "size has no v2 form"}, nil
			},
			desired: "example.com/v2", objects: [][]byte{widget("v1", "a")}, wantCalls: 1,
			wantMessage: `sidecar "widgets" could not convert 1 Widget object(s) to example.com/v2: size has no v2 form`,
		},
		"if the sidecar is unreachable, then the review fails naming it": {
			answer: func(context.Context, *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
				return nil, status.Error(codes.Unavailable, "connection refused")
			},
			desired: "example.com/v2", objects: [][]byte{widget("v1", "a")}, wantCalls: 1,
			wantMessage: "it is unreachable at unix:///run/w.sock: connection refused",
		},
		"if the sidecar is too slow, then the review fails within the deadline": {
			answer: func(ctx context.Context, _ *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
				<-ctx.Done()
				return nil, status.FromContextError(ctx.Err()).Err()
			},
			desired: "example.com/v2", objects: [][]byte{widget("v1", "a")}, wantCalls: 1,
			wantMessage: "it did not answer within",
		},
		"if the sidecar answers fewer objects, then the review fails": {
			answer: func(ctx context.Context, req *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
				out, err := relabel(ctx, req)
				out.Objects = out.Objects[:1]
				return out, err
			},
			desired: "example.com/v2", objects: [][]byte{widget("v1", "a"), widget("v1", "b")}, wantCalls: 1,
			wantMessage: "it answered with 1 object(s) for the 2 sent",
		},
		"if an answer keeps the old version, then the review fails": {
			answer: func(_ context.Context, req *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
				return &polyopv1alpha1.ConvertResponse{Objects: req.GetObjects()}, nil
			},
			desired: "example.com/v2", objects: [][]byte{widget("v1", "a")}, wantCalls: 1,
			wantMessage: `object 0 (ns/a) has apiVersion "example.com/v1", not "example.com/v2"`,
		},
		"if an answer is another object, then the review fails": {
			answer: func(context.Context, *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
				return &polyopv1alpha1.ConvertResponse{Objects: [][]byte{widget("v2", "z")}}, nil
			},
			desired: "example.com/v2", objects: [][]byte{widget("v1", "a")}, wantCalls: 1,
			wantMessage: "object 0 as ns/z, another object than the ns/a sent",
		},
		"if an answer is not JSON, then the review fails": {
			answer: func(context.Context, *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
				return &polyopv1alpha1.ConvertResponse{Objects: [][]byte{[]byte(`{"apiVersion":`)}}, nil
			},
			desired: "example.com/v2", objects: [][]byte{widget("v1", "a")}, wantCalls: 1,
			wantMessage: "object 0 is not valid JSON",
		},
		"if the kind is not declared, then the sidecar is not called": {
			answer: relabel, desired: "example.com/v2", objects: [][]byte{[]byte(`{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g"}}`)},
			wantMessage: `sidecar "widgets" does not convert Gadget.example.com`,
		},
		"if the version is not declared, then the sidecar is not called": {
			answer: relabel, desired: "example.com/v3", objects: [][]byte{widget("v1", "a")},
			wantMessage: "converts Widget.example.com between versions [v1 v2] only, not from v1 to v3",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := &fakesidecar.Fake{OnConvert: tc.answer}
			resp := convert(t, sc, tc.desired, "", tc.objects...)
			if sc.Calls() != tc.wantCalls {
				t.Errorf("the sidecar was called %d times, want %d", sc.Calls(), tc.wantCalls)
			}
			if tc.wantMessage == "" {
				if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != len(tc.objects) {
					t.Fatalf("result %+v with %d objects", resp.Result, len(resp.ConvertedObjects))
				}
				for i, o := range resp.ConvertedObjects {
					if !strings.Contains(string(o.Raw), `"apiVersion":"`+tc.desired+`"`) {
						t.Errorf("object %d: %s", i, o.Raw)
					}
				}
				return
			}
			if resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, tc.wantMessage) {
				t.Errorf("result %+v, want a failure containing %q", resp.Result, tc.wantMessage)
			}
		})
	}
}

func TestConversionDeadlineFollowsTheAPIServersTimeout(t *testing.T) {
	t.Parallel()
	var deadline, called time.Time
	var hasDeadline bool
	sc := &fakesidecar.Fake{OnConvert: func(ctx context.Context, req *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
		called = time.Now()
		deadline, hasDeadline = ctx.Deadline()
		return relabel(ctx, req)
	}}
	// The handler's own cap is 200ms; a shorter API server timeout wins. The
	// deadline is set between the review's sending and the sidecar's call
	// (which a busy machine may set apart, even past the deadline).
	sent := time.Now()
	convert(t, sc, "example.com/v2", "?timeout=150ms", widget("v1", "a"))
	if !hasDeadline || deadline.Sub(called) > 80*time.Millisecond || !deadline.After(sent) {
		t.Errorf("deadline %s after the review was sent, %s after the call; want half of 150ms at most", deadline.Sub(sent), deadline.Sub(called))
	}
}

// TestConversionRefusesWhatIsNotAConversionReview sends the handler bodies
// the API server never sends: each is a 400 or a 413 with a plain message,
// and the sidecar is not called.
func TestConversionRefusesWhatIsNotAConversionReview(t *testing.T) {
	t.Parallel()
	// A chunked body: a reader of unknown length, so that the request
	// declares none.
	chunked := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) }
	big := `{"request":{"uid":"u","desiredAPIVersion":"example.com/v2","objects":[` + widgetList(200) + `]}}`
	for name, tc := range map[string]struct {
		body     io.Reader
		wantCode int
		wantMsg  string
	}{
		"if the review has no request, then it is a 400 saying so": {
			body:     strings.NewReader(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`),
			wantCode: http.StatusBadRequest, wantMsg: "the ConversionReview has no request",
		},
		"if the review's request is null, then it is a 400 saying so": {
			body:     strings.NewReader(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":null}`),
			wantCode: http.StatusBadRequest, wantMsg: "the ConversionReview has no request",
		},
		"if the body is not JSON, then it is a 400 saying so": {
			body:     strings.NewReader(`apiVersion: apiextensions.k8s.io/v1`),
			wantCode: http.StatusBadRequest, wantMsg: "the body is not a ConversionReview",
		},
		"if the body declares more than the limit, then it is a 413 naming the flag": {
			body:     strings.NewReader(big),
			wantCode: http.StatusRequestEntityTooLarge, wantMsg: "over the limit of 4096 bytes: raise the host's --conversion-max-request-bytes",
		},
		"if a body of undeclared length turns out larger than the limit, then it is a 413 naming the flag": {
			body:     chunked(big),
			wantCode: http.StatusRequestEntityTooLarge, wantMsg: "over the limit of 4096 bytes: raise the host's --conversion-max-request-bytes",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := &fakesidecar.Fake{OnConvert: relabel}
			h := conversion.NewHandler(sc, widgets, conversion.Options{SidecarName: "widgets", MaxRequestBytes: 4096})
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, conversion.Path, tc.body))
			if w.Code != tc.wantCode || !strings.Contains(w.Body.String(), tc.wantMsg) {
				t.Errorf("the handler answered %d %q, want %d with %q", w.Code, w.Body.String(), tc.wantCode, tc.wantMsg)
			}
			if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("the answer's content type is %q, want plain text", ct)
			}
			if sc.Calls() != 0 {
				t.Errorf("the sidecar was called %d times", sc.Calls())
			}
		})
	}
}

// TestConversionReadsBodiesUpToTheLimit converts a list that is exactly the
// limit, declared or not.
func TestConversionReadsBodiesUpToTheLimit(t *testing.T) {
	t.Parallel()
	body := []byte(`{"request":{"uid":"u","desiredAPIVersion":"example.com/v2","objects":[` + widgetList(3) + `]}}`)
	for _, declared := range []bool{true, false} {
		var r io.Reader = bytes.NewReader(body)
		if !declared {
			r = io.MultiReader(r)
		}
		sc := &fakesidecar.Fake{OnConvert: relabel}
		h := conversion.NewHandler(sc, widgets, conversion.Options{SidecarName: "widgets", MaxRequestBytes: int64(len(body))})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, conversion.Path, r))
		var out apiextensionsv1.ConversionReview
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil || len(out.Response.ConvertedObjects) != 3 {
			t.Errorf("with the length declared %v, the handler answered %d %s", declared, w.Code, w.Body.String())
		}
	}
}

func widgetList(n int) string {
	objects := make([]string, n)
	for i := range objects {
		objects[i] = string(widget("v1", fmt.Sprintf("w%d", i)))
	}
	return strings.Join(objects, ",")
}
