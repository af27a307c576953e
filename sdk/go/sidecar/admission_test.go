package sidecar_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

// configMapWebhooks default and validate ConfigMaps and record what they saw.
type configMapWebhooks struct {
	seen []string
}

func (w *configMapWebhooks) Default(ctx context.Context, cm *corev1.ConfigMap) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return err
	}
	w.seen = append(w.seen, "default "+string(req.Operation)+" dryRun="+boolString(*req.DryRun)+" user="+req.UserInfo.Username)
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	if _, ok := cm.Data["mode"]; !ok {
		cm.Data["mode"] = "standard"
	}
	if cm.Data["panic"] == "default" {
		panic("the defaulter broke")
	}
	if cm.Data["wait"] == "default" {
		<-ctx.Done()
		return fmt.Errorf("looking up the defaults: %w", ctx.Err())
	}
	if cm.Data["refuse"] == "default" {
		return errors.New("refused by the defaulter")
	}
	return nil
}

func (w *configMapWebhooks) ValidateCreate(ctx context.Context, cm *corev1.ConfigMap) (sidecar.Warnings, error) {
	w.seen = append(w.seen, "create "+cm.Name)
	if cm.Data["wait"] == "validate" {
		<-ctx.Done()
		return nil, errors.New("the quota service did not answer")
	}
	return validateConfigMap(cm)
}

func (w *configMapWebhooks) ValidateUpdate(_ context.Context, old, cm *corev1.ConfigMap) (sidecar.Warnings, error) {
	w.seen = append(w.seen, "update "+old.Data["mode"]+"->"+cm.Data["mode"])
	return validateConfigMap(cm)
}

func (w *configMapWebhooks) ValidateDelete(_ context.Context, cm *corev1.ConfigMap) (sidecar.Warnings, error) {
	w.seen = append(w.seen, "delete "+cm.Name)
	if cm.Data["keep"] == "true" {
		return sidecar.Warnings{"kept"}, errors.New("this ConfigMap is kept")
	}
	return nil, nil
}

func validateConfigMap(cm *corev1.ConfigMap) (sidecar.Warnings, error) {
	var warnings sidecar.Warnings
	if cm.Data["mode"] == "legacy" {
		warnings = append(warnings, "mode legacy is deprecated")
	}
	if cm.Data["panic"] == "validate" {
		panic("the validator broke")
	}
	if m := cm.Data["mode"]; m != "" && m != "standard" && m != "legacy" {
		errs := field.ErrorList{field.NotSupported(field.NewPath("data", "mode"), m, []string{"standard", "legacy"})}
		return warnings, apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, cm.Name, errs)
	}
	return warnings, nil
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func newWebhookServer(t *testing.T) (*sidecar.Server, *configMapWebhooks) {
	t.Helper()
	srv := newServer(t)
	w := &configMapWebhooks{}
	err := sidecar.NewWebhookManagedBy[*corev1.ConfigMap](srv).
		WithDefaulter(w).
		WithValidator(w).
		WithOperations(sidecar.Create, sidecar.Update, sidecar.Delete).
		WithFailurePolicy(sidecar.Ignore).
		WithTimeoutSeconds(5).
		Complete()
	if err != nil {
		t.Fatal(err)
	}
	return srv, w
}

func settingsMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}, Data: data}
}

func TestWebhooksAreDescribed(t *testing.T) {
	t.Parallel()
	srv, _ := newWebhookServer(t)
	resp := sidecartest.New(t, srv).Describe()
	if len(resp.GetControllers()) != 0 || len(resp.GetWebhooks()) != 1 || len(resp.GetConversions()) != 0 {
		t.Fatalf("Describe = %v, want one webhook alone", resp)
	}
	wh := resp.GetWebhooks()[0]
	want := &polyopv1alpha1.WebhookDescription{
		Kind:           &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Default:        true,
		Validate:       true,
		Operations:     []polyopv1alpha1.Operation{sidecar.Create, sidecar.Update, sidecar.Delete},
		FailurePolicy:  sidecar.Ignore,
		TimeoutSeconds: 5,
	}
	if wh.String() != want.String() {
		t.Errorf("webhook\n %v\nwant\n %v", wh, want)
	}
}

func TestDefaultSetsDefaultsAndKeepsWhatTheTypeDoesNotKnow(t *testing.T) {
	t.Parallel()
	srv, w := newWebhookServer(t)
	h := sidecartest.New(t, srv)
	// The API server's JSON, with a field ConfigMap does not know and an
	// empty field the Go type leaves out.
	raw := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"default","annotations":{}},` +
		`"data":{"a":"1"},"futureField":{"x":1},"immutable":false}`
	req := &polyopv1alpha1.DefaultRequest{Request: &polyopv1alpha1.AdmissionRequest{
		Kind:      &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Key:       &polyopv1alpha1.ObjectKey{Namespace: "default", Name: "settings"},
		Operation: sidecar.Create,
		UserInfo:  &polyopv1alpha1.UserInfo{Username: "alice"},
		Object:    []byte(raw),
		DryRun:    true,
	}}
	resp, err := h.CallDefault(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(resp.GetObject(), &got); err != nil {
		t.Fatalf("the defaulted object is not JSON: %v\n%s", err, resp.GetObject())
	}
	want := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata":    map[string]any{"name": "settings", "namespace": "default", "annotations": map[string]any{}},
		"data":        map[string]any{"a": "1", "mode": "standard"},
		"futureField": map[string]any{"x": float64(1)},
		"immutable":   false,
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("defaulted\n %s\nwant only the defaulter's change\n %s", gotJSON, wantJSON)
	}
	if strings.Join(w.seen, ";") != "default CREATE dryRun=true user=alice" {
		t.Errorf("the defaulter saw %q", w.seen)
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		data        map[string]string
		wantChanged bool
		wantDenial  string
	}{
		"if a default is missing, then the object comes back with it": {data: map[string]string{}, wantChanged: true},
		"if nothing is missing, then no object comes back":            {data: map[string]string{"mode": "legacy"}},
		"if the defaulter fails, then the request is denied":          {data: map[string]string{"refuse": "default"}, wantDenial: "refused by the defaulter"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, _ := newWebhookServer(t)
			res := sidecartest.New(t, srv).Default(t.Context(), settingsMap(tc.data))
			if tc.wantDenial != "" {
				if res.Allowed || res.Denial.Message != tc.wantDenial {
					t.Fatalf("allowed %v, denial %+v; want %q", res.Allowed, res.Denial, tc.wantDenial)
				}
				return
			}
			if (res.Defaulted != nil) != tc.wantChanged {
				t.Errorf("defaulted %s, want changed %v", res.Defaulted, tc.wantChanged)
			}
			var cm corev1.ConfigMap
			res.Object(&cm)
			if cm.Data["mode"] == "" {
				t.Errorf("no mode after defaulting: %v", cm.Data)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	srv, w := newWebhookServer(t)
	h := sidecartest.New(t, srv)
	ctx := t.Context()

	if res := h.ValidateCreate(ctx, settingsMap(map[string]string{"mode": "standard"})); !res.Allowed {
		t.Errorf("a valid create was refused: %+v", res.Denial)
	}
	res := h.ValidateCreate(ctx, settingsMap(map[string]string{"mode": "turbo"}))
	if res.Allowed || len(res.Denial.FieldErrors) != 1 || res.Denial.FieldErrors[0].Error() != `data.mode: Unsupported value: "turbo": supported values: "standard", "legacy"` {
		t.Errorf("an invalid create: allowed %v, denial %+v", res.Allowed, res.Denial)
	}
	res = h.ValidateUpdate(ctx, settingsMap(map[string]string{"mode": "standard"}), settingsMap(map[string]string{"mode": "legacy"}))
	if !res.Allowed || strings.Join(res.Warnings, ";") != "mode legacy is deprecated" {
		t.Errorf("an update: allowed %v, warnings %q", res.Allowed, res.Warnings)
	}
	res = h.ValidateDelete(ctx, settingsMap(map[string]string{"keep": "true"}))
	if res.Allowed || res.Denial.Message != "this ConfigMap is kept" || strings.Join(res.Warnings, ";") != "kept" {
		t.Errorf("a refused delete: allowed %v, denial %+v, warnings %q", res.Allowed, res.Denial, res.Warnings)
	}
	want := "create settings;create settings;update standard->legacy;delete settings"
	if got := strings.Join(w.seen, ";"); got != want {
		t.Errorf("the validator saw %q, want %q", got, want)
	}
}

func TestAdmissionErrorsTheHostSeesAsFailures(t *testing.T) {
	t.Parallel()
	srv, _ := newWebhookServer(t)
	h := sidecartest.New(t, srv)
	ctx := t.Context()
	secretReq := h.NewAdmissionRequest(sidecar.Create, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, nil)
	cmReq := h.NewAdmissionRequest(sidecar.Create, settingsMap(nil), nil)
	cmReq.Object = []byte(`{"data": "not a map"}`)
	panicDefault := h.NewAdmissionRequest(sidecar.Create, settingsMap(map[string]string{"panic": "default"}), nil)
	panicValidate := h.NewAdmissionRequest(sidecar.Create, settingsMap(map[string]string{"panic": "validate"}), nil)

	for name, tc := range map[string]struct {
		call func() error
		want codes.Code
	}{
		"if the kind has no webhook, then NOT_FOUND": {
			call: func() error {
				_, err := h.CallValidate(ctx, &polyopv1alpha1.ValidateRequest{Request: secretReq})
				return err
			},
			want: codes.NotFound,
		},
		"if the object does not decode, then INVALID_ARGUMENT": {
			call: func() error { _, err := h.CallDefault(ctx, &polyopv1alpha1.DefaultRequest{Request: cmReq}); return err },
			want: codes.InvalidArgument,
		},
		"if the defaulter panics, then INTERNAL": {
			call: func() error {
				_, err := h.CallDefault(ctx, &polyopv1alpha1.DefaultRequest{Request: panicDefault})
				return err
			},
			want: codes.Internal,
		},
		"if the validator panics, then INTERNAL": {
			call: func() error {
				_, err := h.CallValidate(ctx, &polyopv1alpha1.ValidateRequest{Request: panicValidate})
				return err
			},
			want: codes.Internal,
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != tc.want {
				t.Errorf("error %v, want code %s", err, tc.want)
			}
		})
	}

	onlyValidator := newServer(t)
	if err := sidecar.NewWebhookManagedBy[*corev1.ConfigMap](onlyValidator).WithValidator(&configMapWebhooks{}).Complete(); err != nil {
		t.Fatal(err)
	}
	_, err := sidecartest.New(t, onlyValidator).CallDefault(ctx, &polyopv1alpha1.DefaultRequest{Request: cmReq})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("Default on a kind without a defaulter: %v, want UNIMPLEMENTED", err)
	}
}

// TestAdmissionCutOffByTheDeadlineIsNoDenial checks that a webhook that
// returns an error once the call's deadline has passed fails the call with
// DEADLINE_EXCEEDED, which the host reports as a sidecar that did not answer
// in time, rather than denying the object with "context deadline exceeded".
// It calls the server's gRPC service directly, so that no gRPC client's own
// deadline can produce the code.
func TestAdmissionCutOffByTheDeadlineIsNoDenial(t *testing.T) {
	t.Parallel()
	srv, _ := newWebhookServer(t)
	h := sidecartest.New(t, srv)
	waitDefault := h.NewAdmissionRequest(sidecar.Create, settingsMap(map[string]string{"wait": "default"}), nil)
	waitValidate := h.NewAdmissionRequest(sidecar.Create, settingsMap(map[string]string{"wait": "validate"}), nil)

	short := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	resp, err := sidecar.Service(srv).Default(short(), &polyopv1alpha1.DefaultRequest{Request: waitDefault})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("Default cut off by its deadline: %v, %v; want DEADLINE_EXCEEDED", resp, err)
	}
	vresp, err := sidecar.Service(srv).Validate(short(), &polyopv1alpha1.ValidateRequest{Request: waitValidate})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("Validate cut off by its deadline: %v, %v; want DEADLINE_EXCEEDED", vresp, err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := sidecar.Service(srv).Default(ctx, &polyopv1alpha1.DefaultRequest{Request: waitDefault}); status.Code(err) != codes.Canceled {
		t.Errorf("Default of a canceled call: %v, want CANCELLED", err)
	}
}

func TestDefaultSkipsDeletes(t *testing.T) {
	t.Parallel()
	srv, w := newWebhookServer(t)
	h := sidecartest.New(t, srv)
	req := h.NewAdmissionRequest(sidecar.Delete, nil, settingsMap(nil))
	resp, err := h.CallDefault(t.Context(), &polyopv1alpha1.DefaultRequest{Request: req})
	if err != nil || resp.GetObject() != nil || resp.GetDenied() != nil || len(w.seen) != 0 {
		t.Errorf("Default of a delete: %v, %v; the defaulter saw %q", resp, err, w.seen)
	}
}

func TestWebhookBuilderRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		build   func(*sidecar.Server) error
		wantErr string
	}{
		"if there is nothing to register, then Complete fails": {
			build:   func(s *sidecar.Server) error { return sidecar.NewWebhookManagedBy[*corev1.ConfigMap](s).Complete() },
			wantErr: "nothing to register",
		},
		"if the timeout is out of range, then Complete fails": {
			build: func(s *sidecar.Server) error {
				return sidecar.NewWebhookManagedBy[*corev1.ConfigMap](s).WithValidator(&configMapWebhooks{}).WithTimeoutSeconds(31).Complete()
			},
			wantErr: "between 1 and 30",
		},
		"if the operation is unknown, then Complete fails": {
			build: func(s *sidecar.Server) error {
				return sidecar.NewWebhookManagedBy[*corev1.ConfigMap](s).WithValidator(&configMapWebhooks{}).WithOperations(99).Complete()
			},
			wantErr: "not an operation",
		},
		"if the kind already has webhooks, then Complete fails": {
			build: func(s *sidecar.Server) error {
				if err := sidecar.NewWebhookManagedBy[*corev1.ConfigMap](s).WithValidator(&configMapWebhooks{}).Complete(); err != nil {
					return err
				}
				return sidecar.NewWebhookManagedBy[*corev1.ConfigMap](s).WithDefaulter(&configMapWebhooks{}).Complete()
			},
			wantErr: "already has webhooks",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := tc.build(newServer(t))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestAServerWithWebhooksAloneServes(t *testing.T) {
	t.Parallel()
	srv, _ := newWebhookServer(t)
	// serve waits until the server answers a health check with SERVING.
	_, stop := serve(t, srv)
	if err := stop(); err != nil {
		t.Errorf("ServeListener: %v", err)
	}
}

// Gadget is a kind with two versions, v1 the hub and v2 converting to it, for
// the conversion tests.
type GadgetV1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Size              int64 `json:"size"`
}

type GadgetV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Dimensions        struct {
		Size int64 `json:"size"`
	} `json:"dimensions"`
}

func (g *GadgetV1) DeepCopyObject() runtime.Object {
	c := *g
	g.DeepCopyInto(&c.ObjectMeta)
	return &c
}

func (g *GadgetV2) DeepCopyObject() runtime.Object {
	c := *g
	g.DeepCopyInto(&c.ObjectMeta)
	return &c
}

func (*GadgetV1) Hub() {}

func (g *GadgetV2) ConvertTo(hub conversion.Hub) error {
	dst := hub.(*GadgetV1)
	dst.ObjectMeta = g.ObjectMeta
	dst.Size = g.Dimensions.Size
	return nil
}

func (g *GadgetV2) ConvertFrom(hub conversion.Hub) error {
	src := hub.(*GadgetV1)
	if src.Size < 0 {
		return errors.New("a negative size has no v2 form")
	}
	g.ObjectMeta = src.ObjectMeta
	g.Dimensions.Size = src.Size
	return nil
}

func newGadgetServer(t *testing.T, converter func(*runtime.Scheme) (crconversion.Converter, error)) *sidecar.Server {
	t.Helper()
	scheme := runtime.NewScheme()
	scheme.AddKnownTypeWithName(schema.GroupVersionKind{Group: "test.polyop.dev", Version: "v1", Kind: "Gadget"}, &GadgetV1{})
	scheme.AddKnownTypeWithName(schema.GroupVersionKind{Group: "test.polyop.dev", Version: "v2", Kind: "Gadget"}, &GadgetV2{})
	srv, err := sidecar.New(sidecar.Options{Name: "gadgets", Scheme: scheme, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	b := sidecar.NewWebhookManagedBy[*GadgetV1](srv)
	if converter != nil {
		b = b.WithConverter(converter)
	}
	if err := b.Complete(); err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestConversionThroughTheHub(t *testing.T) {
	t.Parallel()
	srv := newGadgetServer(t, nil)
	h := sidecartest.New(t, srv)
	if c := h.Describe().GetConversions(); len(c) != 1 || c[0].GetKind().GetGroup() != "test.polyop.dev" || c[0].GetKind().GetKind() != "Gadget" || strings.Join(c[0].GetVersions(), ",") != "v1,v2" {
		t.Fatalf("conversions = %v", c)
	}
	v1 := &GadgetV1{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Labels: map[string]string{"a": "b"}}, Size: 3}
	var v2 GadgetV2
	if err := h.Convert(t.Context(), v1, &v2); err != nil {
		t.Fatal(err)
	}
	if v2.APIVersion != "test.polyop.dev/v2" || v2.Kind != "Gadget" || v2.Dimensions.Size != 3 || v2.Name != "g" || v2.Labels["a"] != "b" {
		t.Errorf("v1 → v2 = %+v", v2)
	}
	var back GadgetV1
	if err := h.Convert(t.Context(), &v2, &back); err != nil {
		t.Fatal(err)
	}
	if back.APIVersion != "test.polyop.dev/v1" || back.Size != 3 {
		t.Errorf("v2 → v1 = %+v", back)
	}
	err := h.Convert(t.Context(), &GadgetV1{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bad"}, Size: -1}, &v2)
	if err == nil || !strings.Contains(err.Error(), "converting Gadget ns/bad from v1 to v2: a negative size has no v2 form") {
		t.Errorf("a conversion that fails: %v", err)
	}
}

func TestWebhooksOfEveryVersionShareTheHubConversion(t *testing.T) {
	t.Parallel()
	srv := newGadgetServer(t, nil)
	// The v2 builder finds the same conversion through the hub as the v1
	// builder did: it registers nothing more, and fails for nothing.
	if err := sidecar.NewWebhookManagedBy[*GadgetV2](srv).Complete(); err != nil {
		t.Fatalf("a second version's builder: %v", err)
	}
	if c := sidecartest.New(t, srv).Describe().GetConversions(); len(c) != 1 {
		t.Errorf("conversions = %v, want one", c)
	}
}

func TestConversionRequestsTheSidecarCannotServe(t *testing.T) {
	t.Parallel()
	h := sidecartest.New(t, newGadgetServer(t, nil))
	for name, tc := range map[string]struct {
		req  *polyopv1alpha1.ConvertRequest
		want string
	}{
		"if the kind is not converted, then the answer says so": {
			req:  &polyopv1alpha1.ConvertRequest{DesiredApiVersion: "v1", Objects: [][]byte{[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`)}},
			want: `sidecar "gadgets" does not convert ConfigMap`,
		},
		"if an object is not JSON, then the answer says so": {
			req:  &polyopv1alpha1.ConvertRequest{DesiredApiVersion: "test.polyop.dev/v2", Objects: [][]byte{[]byte(`nope`)}},
			want: "not a JSON object",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resp, err := h.CallConvert(t.Context(), tc.req)
			if err != nil || !strings.Contains(resp.GetError(), tc.want) {
				t.Errorf("Convert = %v, %v; want an error containing %q", resp, err, tc.want)
			}
		})
	}
	// Objects already at the desired version pass through unchanged.
	same := []byte(`{"apiVersion":"test.polyop.dev/v2","kind":"Gadget","metadata":{"name":"g"},"dimensions":{"size":1},"extra":true}`)
	resp, err := h.CallConvert(t.Context(), &polyopv1alpha1.ConvertRequest{DesiredApiVersion: "test.polyop.dev/v2", Objects: [][]byte{same}})
	if err != nil || resp.GetError() != "" || string(resp.GetObjects()[0]) != string(same) {
		t.Errorf("Convert to the same version = %v, %v", resp, err)
	}
}

func TestConversionWithAConverter(t *testing.T) {
	t.Parallel()
	converter := crconversion.NewHubSpokeConverter(&GadgetV1{}, crconversion.NewSpokeConverter(&GadgetV2{},
		func(_ context.Context, hub *GadgetV1, spoke *GadgetV2) error {
			spoke.ObjectMeta = hub.ObjectMeta
			spoke.Dimensions.Size = hub.Size * 10
			return nil
		},
		func(_ context.Context, spoke *GadgetV2, hub *GadgetV1) error {
			hub.ObjectMeta = spoke.ObjectMeta
			hub.Size = spoke.Dimensions.Size / 10
			return nil
		}))
	h := sidecartest.New(t, newGadgetServer(t, converter))
	var v2 GadgetV2
	if err := h.Convert(t.Context(), &GadgetV1{ObjectMeta: metav1.ObjectMeta{Name: "g"}, Size: 4}, &v2); err != nil {
		t.Fatal(err)
	}
	if v2.Dimensions.Size != 40 {
		t.Errorf("the converter was not used: %+v", v2)
	}
}
