package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/go-logr/logr/testr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/polyop/polyop/internal/admission"
	"github.com/polyop/polyop/internal/description"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	sdk "github.com/polyop/polyop/sdk/go/sidecar"
	sdktest "github.com/polyop/polyop/sdk/go/sidecartest"
)

// settings defaults and validates ConfigMaps; the same code runs in an
// in-process controller-runtime webhook and behind the host.
type settings struct{}

func (settings) Default(_ context.Context, cm *corev1.ConfigMap) error {
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels["tier"] = "standard"
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data["mode"] = "safe"
	if cm.Data["refuse"] != "" {
		return errors.New(cm.Data["refuse"])
	}
	return nil
}

func (settings) ValidateCreate(_ context.Context, cm *corev1.ConfigMap) (cradmission.Warnings, error) {
	return validate(cm)
}

func (settings) ValidateUpdate(_ context.Context, _, cm *corev1.ConfigMap) (cradmission.Warnings, error) {
	return validate(cm)
}

func (settings) ValidateDelete(context.Context, *corev1.ConfigMap) (cradmission.Warnings, error) {
	return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "w", errors.New("settings are kept"))
}

func validate(cm *corev1.ConfigMap) (cradmission.Warnings, error) {
	warnings := cradmission.Warnings{"checked by the settings validator"}
	switch cm.Data["case"] {
	case "invalid":
		path := field.NewPath("data")
		return warnings, apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, cm.Name, field.ErrorList{
			field.Invalid(path.Key("start"), "2026-01-01T00:00:00Z", "must be in the past"),
			field.Invalid(path.Key("replicas"), 7, "must be odd and below 5"),
			field.Invalid(path.Key("ports"), []int{80, 443}, "must hold one port"),
			field.Required(path.Key("name"), "a name is needed"),
			field.NotSupported(path.Key("mode"), "fast", []string{"safe", "slow"}),
			field.Forbidden(path.Key("secret"), "may not be set"),
			field.TooLong(path.Key("title"), "xxxxxxxxxx", 5),
			field.TooShort(path.Key("code"), "ab", 3),
		})
	case "refused":
		return warnings, errors.New("not on Fridays")
	case "conflict":
		return warnings, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, cm.Name, errors.New("port 80 is taken"))
	}
	return warnings, nil
}

// harnessSidecar is a Go sidecar, called through the SDK's test harness, as
// the host's admission handlers see a sidecar.
type harnessSidecar struct{ h *sdktest.Harness }

func (s harnessSidecar) Default(ctx context.Context, req *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
	return s.h.CallDefault(ctx, req)
}

func (s harnessSidecar) Validate(ctx context.Context, req *polyopv1alpha1.ValidateRequest) (*polyopv1alpha1.ValidateResponse, error) {
	return s.h.CallValidate(ctx, req)
}

// TestAnswersMatchAnInProcessControllerRuntimeWebhook sends the same
// AdmissionReview to controller-runtime's own webhook around the defaulter
// and validator, and to the host's, which calls them in a Go sidecar: the API
// server must get the same answer from both.
func TestAnswersMatchAnInProcessControllerRuntimeWebhook(t *testing.T) {
	t.Parallel()
	srv, err := sdk.New(sdk.Options{Name: "settings", Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = sdk.NewWebhookManagedBy[*corev1.ConfigMap](srv).WithDefaulter(settings{}).WithValidator(settings{}).
		WithOperations(sdk.Create, sdk.Update, sdk.Delete).Complete()
	if err != nil {
		t.Fatal(err)
	}
	hook := description.Webhook{
		GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Default: true, Validate: true,
		FailurePolicy: polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL, TimeoutSeconds: 10,
	}
	// The Go SDK's test harness calls the sidecar as the host's client does:
	// the gRPC hop is left out here, and measured in the benchmark.
	sc := harnessSidecar{sdktest.New(t, srv)}
	host := map[string]*cradmission.Webhook{
		"default":  admission.NewDefaulting(sc, hook, opts),
		"validate": admission.NewValidating(sc, hook, opts),
	}
	inProcess := map[string]*cradmission.Webhook{
		"default":  cradmission.WithDefaulter[*corev1.ConfigMap](clientgoscheme.Scheme, settings{}),
		"validate": cradmission.WithValidator[*corev1.ConfigMap](clientgoscheme.Scheme, settings{}),
	}

	cm := func(data map[string]string) []byte {
		raw, _ := json.Marshal(&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"},
			Data:       data,
		})
		return raw
	}
	for name, tc := range map[string]struct {
		webhook string
		req     admissionv1.AdmissionRequest
		// messageOnly compares the code, reason and message of the status:
		// a Denial carries those of a status other than Invalid, not its
		// details.
		messageOnly bool
	}{
		"if the defaulter sets fields, then the patches match": {
			webhook: "default", req: admissionv1.AdmissionRequest{Object: runtime.RawExtension{Raw: cm(map[string]string{"a": "b"})}},
		},
		"if the defaulter fails, then the denials match": {
			webhook: "default", req: admissionv1.AdmissionRequest{Object: runtime.RawExtension{Raw: cm(map[string]string{"refuse": "no defaults today"})}},
		},
		"if the object is valid, then the warnings match": {
			webhook: "validate", req: admissionv1.AdmissionRequest{Object: runtime.RawExtension{Raw: cm(nil)}},
		},
		"if the object has invalid fields, then the 422 statuses match, causes and all": {
			webhook: "validate", req: admissionv1.AdmissionRequest{Object: runtime.RawExtension{Raw: cm(map[string]string{"case": "invalid"})}},
		},
		"if the validator refuses, then the 403 statuses match": {
			webhook: "validate", req: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update,
				Object:    runtime.RawExtension{Raw: cm(map[string]string{"case": "refused"})},
				OldObject: runtime.RawExtension{Raw: cm(nil)},
			},
		},
		"if the validator answers a conflict, then the statuses' code, reason and message match": {
			webhook: "validate", req: admissionv1.AdmissionRequest{Object: runtime.RawExtension{Raw: cm(map[string]string{"case": "conflict"})}},
			messageOnly: true,
		},
		"if the deletion is forbidden, then the statuses' code, reason and message match": {
			webhook: "validate", req: admissionv1.AdmissionRequest{Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: cm(nil)}},
			messageOnly: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := tc.req
			req.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
			want := review(t, inProcess[tc.webhook], req, "")
			got := review(t, host[tc.webhook], req, "")
			if got.Allowed != want.Allowed || !reflect.DeepEqual(got.Warnings, want.Warnings) {
				t.Errorf("allowed %v, warnings %q; in process: %v, %q", got.Allowed, got.Warnings, want.Allowed, want.Warnings)
			}
			if tc.messageOnly && got.Result != nil && want.Result != nil {
				want.Result = &metav1.Status{Code: want.Result.Code, Reason: want.Result.Reason, Message: want.Result.Message}
			}
			if !reflect.DeepEqual(got.Result, want.Result) {
				gotJSON, _ := json.MarshalIndent(got.Result, "", "  ")
				wantJSON, _ := json.MarshalIndent(want.Result, "", "  ")
				t.Errorf("status\n%s\nin process:\n%s", gotJSON, wantJSON)
			}
			if g, w := patchOps(t, got.Patch), patchOps(t, want.Patch); !slices.Equal(g, w) {
				t.Errorf("patch %q, in process %q", g, w)
			}
		})
	}
}

// patchOps returns a JSON patch's operations, each as JSON, sorted.
func patchOps(t *testing.T, patch []byte) []string {
	t.Helper()
	if len(patch) == 0 {
		return nil
	}
	var ops []json.RawMessage
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatalf("not a JSON patch: %v\n%s", err, patch)
	}
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = string(op)
	}
	slices.Sort(out)
	return out
}
