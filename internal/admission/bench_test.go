package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	"github.com/polyop/polyop/internal/admission"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/sidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	sdk "github.com/polyop/polyop/sdk/go/sidecar"
)

// BenchmarkAdmission measures one admission call, from the API server's
// AdmissionReview to the answer, for a MaintenanceWindow of about 4 KB:
//
//   - in-process: controller-runtime's own webhook (admission.WithDefaulter,
//     admission.WithValidator) calling the defaulter or validator in the
//     webhook's process, as in a kubebuilder project;
//   - host: the host's handler calling the same defaulter or validator in a
//     Go sidecar, over gRPC on a unix socket.
//
// Each iteration runs both, one after the other, so that both see the same
// machine; each sub-benchmark reports the p50 and p99 of each and what the
// hop adds at p50 and p99 (host less in-process), in nanoseconds.
func BenchmarkAdmission(b *testing.B) {
	// controller-runtime's webhook logs through its global logger.
	logf.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	client := serveSidecar(b, scheme)
	hook := description.Webhook{
		GVK: v1.GroupVersion.WithKind("MaintenanceWindow"), Default: true, Validate: true,
		FailurePolicy: polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL, TimeoutSeconds: 10,
	}
	opts := admission.Options{SidecarName: "bench", SidecarAddress: client.Address()}

	for _, tc := range []struct {
		name      string
		inProcess http.Handler
		host      http.Handler
		body      []byte
	}{
		// Without a duration, so that the defaulter has work to do.
		{"default", cradmission.WithDefaulter[*v1.MaintenanceWindow](scheme, windowWebhook{}), admission.NewDefaulting(client, hook, opts), reviewOf4KB(b, "")},
		{"validate", cradmission.WithValidator[*v1.MaintenanceWindow](scheme, windowWebhook{}), admission.NewValidating(client, hook, opts), reviewOf4KB(b, "2h")},
	} {
		body := tc.body
		b.Run(tc.name, func(b *testing.B) {
			// Both must agree before they are timed.
			if a, h := serve(b, tc.inProcess, body), serve(b, tc.host, body); a != h {
				b.Fatalf("the answers differ:\nin process: %s\nhost:       %s", a, h)
			}
			inProcess := make([]time.Duration, 0, b.N)
			host := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				serve(b, tc.inProcess, body)
				mid := time.Now()
				serve(b, tc.host, body)
				inProcess = append(inProcess, mid.Sub(start))
				host = append(host, time.Since(mid))
			}
			b.StopTimer()
			slices.Sort(inProcess)
			slices.Sort(host)
			p50, p99 := len(host)/2, len(host)*99/100
			b.ReportMetric(float64(inProcess[p50].Nanoseconds()), "in-process-p50-ns")
			b.ReportMetric(float64(inProcess[p99].Nanoseconds()), "in-process-p99-ns")
			b.ReportMetric(float64(host[p50].Nanoseconds()), "host-p50-ns")
			b.ReportMetric(float64(host[p99].Nanoseconds()), "host-p99-ns")
			b.ReportMetric(float64((host[p50] - inProcess[p50]).Nanoseconds()), "added-p50-ns")
			b.ReportMetric(float64((host[p99] - inProcess[p99]).Nanoseconds()), "added-p99-ns")
		})
	}
}

// serve sends the AdmissionReview body to h and returns the response's
// allowed flag, patch and warnings, to compare.
func serve(b *testing.B, h http.Handler, body []byte) string {
	r := httptest.NewRequest(http.MethodPost, "/webhook?timeout=10s", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
		b.Fatalf("no AdmissionReview: %v\n%s", err, w.Body.String())
	}
	if !out.Response.Allowed {
		b.Fatalf("refused: %+v", out.Response.Result)
	}
	return fmt.Sprintf("%v %s %q", out.Response.Allowed, patchOpsB(out.Response.Patch), out.Response.Warnings)
}

func patchOpsB(patch []byte) string {
	var ops []json.RawMessage
	_ = json.Unmarshal(patch, &ops)
	s := make([]string, len(ops))
	for i, op := range ops {
		s[i] = string(op)
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// windowWebhook defaults and validates as the example's webhooks do.
type windowWebhook struct{}

func (windowWebhook) Default(_ context.Context, mw *v1.MaintenanceWindow) error {
	if mw.Spec.Duration == "" {
		mw.Spec.Duration = "1h"
	}
	if _, ok := mw.Labels["examples.polyop.dev/team"]; !ok {
		if mw.Labels == nil {
			mw.Labels = map[string]string{}
		}
		mw.Labels["examples.polyop.dev/team"] = "unassigned"
	}
	return nil
}

func (w windowWebhook) ValidateCreate(_ context.Context, mw *v1.MaintenanceWindow) (cradmission.Warnings, error) {
	return w.validate(mw)
}

func (w windowWebhook) ValidateUpdate(_ context.Context, _, mw *v1.MaintenanceWindow) (cradmission.Warnings, error) {
	return w.validate(mw)
}

func (windowWebhook) ValidateDelete(context.Context, *v1.MaintenanceWindow) (cradmission.Warnings, error) {
	return nil, nil
}

func (windowWebhook) validate(mw *v1.MaintenanceWindow) (cradmission.Warnings, error) {
	var errs field.ErrorList
	if _, err := time.Parse(time.RFC3339, mw.Spec.Start); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "start"), mw.Spec.Start, "must be an RFC 3339 time"))
	}
	if d, err := time.ParseDuration(mw.Spec.Duration); err != nil || d < time.Minute || d > 24*time.Hour {
		errs = append(errs, field.Invalid(field.NewPath("spec", "duration"), mw.Spec.Duration, "must be between 1m and 24h"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(v1.GroupVersion.WithKind("MaintenanceWindow").GroupKind(), mw.Name, errs)
	}
	return cradmission.Warnings{"checked"}, nil
}

// serveSidecar serves a Go sidecar with windowWebhook on a unix socket and
// returns the host's client to it.
func serveSidecar(b *testing.B, scheme *runtime.Scheme) *sidecar.Client {
	srv, err := sdk.New(sdk.Options{Name: "bench", Scheme: scheme, Logger: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	if err := sdk.NewWebhookManagedBy[*v1.MaintenanceWindow](srv).WithDefaulter(windowWebhook{}).WithValidator(windowWebhook{}).Complete(); err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "po-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	address := "unix://" + filepath.Join(dir, "s.sock")
	lis, err := sdk.Listen(address)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeListener(ctx, lis) }()
	b.Cleanup(func() { cancel(); <-done })
	client, err := sidecar.New(sidecar.Options{Address: address})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	return client
}

// reviewOf4KB is the AdmissionReview of the creation of a MaintenanceWindow of
// about 4 KB, with the duration given.
func reviewOf4KB(b *testing.B, duration string) []byte {
	mw := &v1.MaintenanceWindow{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "MaintenanceWindow"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "production", Name: "nightly-database-maintenance",
			Labels:      map[string]string{"app.kubernetes.io/name": "database", "app.kubernetes.io/part-of": "billing"},
			Annotations: map[string]string{},
		},
		Spec: v1.MaintenanceWindowSpec{Start: "2026-01-01T02:00:00Z", Duration: duration, Every: "24h"},
	}
	for i := range 30 {
		mw.Annotations[fmt.Sprintf("example.com/note-%02d", i)] = strings.Repeat("x", 100)
	}
	raw, err := json.Marshal(mw)
	if err != nil {
		b.Fatal(err)
	}
	if n := len(raw); n < 3500 || n > 5000 {
		b.Fatalf("the object is %d bytes, want about 4 KB", n)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "bench",
			Kind:      metav1.GroupVersionKind{Group: v1.GroupVersion.Group, Version: "v1", Kind: "MaintenanceWindow"},
			Resource:  metav1.GroupVersionResource{Group: v1.GroupVersion.Group, Version: "v1", Resource: "maintenancewindows"},
			Namespace: mw.Namespace, Name: mw.Name,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}
