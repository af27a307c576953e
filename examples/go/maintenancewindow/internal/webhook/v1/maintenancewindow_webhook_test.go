package v1_test

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	"github.com/polyop/polyop/examples/go/maintenancewindow/api/v1beta1"
	webhookv1 "github.com/polyop/polyop/examples/go/maintenancewindow/internal/webhook/v1"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

func newHarness(t *testing.T) *sidecartest.Harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	srv, err := sidecar.New(sidecar.Options{Name: "test", Scheme: scheme, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhookv1.SetupWithServer(srv); err != nil {
		t.Fatal(err)
	}
	return sidecartest.New(t, srv)
}

func window(opts ...func(*v1.MaintenanceWindow)) *v1.MaintenanceWindow {
	mw := &v1.MaintenanceWindow{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nightly", Labels: map[string]string{webhookv1.TeamLabel: "storage"}},
		Spec:       v1.MaintenanceWindowSpec{Start: "2026-01-01T00:00:00Z", Duration: "2h", Every: "24h"},
	}
	for _, opt := range opts {
		opt(mw)
	}
	return mw
}

func TestDefaulter(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		window       *v1.MaintenanceWindow
		wantDuration string
		wantTeam     string
		wantChange   bool
	}{
		"if the duration is missing, then it is one hour": {
			window:       window(func(mw *v1.MaintenanceWindow) { mw.Spec.Duration = "" }),
			wantDuration: "1h", wantTeam: "storage", wantChange: true,
		},
		"if the team label is missing, then it is unassigned": {
			window:       window(func(mw *v1.MaintenanceWindow) { mw.Labels = nil }),
			wantDuration: "2h", wantTeam: "unassigned", wantChange: true,
		},
		"if everything is set, then nothing changes": {
			window:       window(),
			wantDuration: "2h", wantTeam: "storage",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := newHarness(t).Default(t.Context(), tc.window)
			if !res.Allowed {
				t.Fatalf("denied: %+v", res.Denial)
			}
			if got := res.Defaulted != nil; got != tc.wantChange {
				t.Errorf("changed = %v, want %v", got, tc.wantChange)
			}
			var got v1.MaintenanceWindow
			res.Object(&got)
			if got.Spec.Duration != tc.wantDuration || got.Labels[webhookv1.TeamLabel] != tc.wantTeam {
				t.Errorf("duration %q, team %q; want %q, %q", got.Spec.Duration, got.Labels[webhookv1.TeamLabel], tc.wantDuration, tc.wantTeam)
			}
		})
	}
}

func TestValidator(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		window     *v1.MaintenanceWindow
		wantErrors []string // field.Error.Error() of each
		wantWarn   string
	}{
		"if the spec is valid, then the window is allowed": {
			window: window(),
		},
		"if the duration is longer than a day, then it is out of range": {
			window:     window(func(mw *v1.MaintenanceWindow) { mw.Spec.Duration = "25h"; mw.Spec.Every = "" }),
			wantErrors: []string{`spec.duration: Invalid value: "25h": must be between 1m and 24h`},
		},
		"if the duration is shorter than a minute, then it is out of range": {
			window:     window(func(mw *v1.MaintenanceWindow) { mw.Spec.Duration = "30s" }),
			wantErrors: []string{`spec.duration: Invalid value: "30s": must be between 1m and 24h`},
		},
		"if every field is wrong, then every field is reported": {
			window: window(func(mw *v1.MaintenanceWindow) {
				mw.Spec = v1.MaintenanceWindowSpec{Start: "soon", Duration: "long", Every: "often"}
			}),
			wantErrors: []string{
				`spec.start: Invalid value: "soon": must be an RFC 3339 time, such as 2026-01-01T00:00:00Z`,
				`spec.duration: Invalid value: "long": must be a duration, such as 2h or 90m`,
				`spec.every: Invalid value: "often": must be a duration, such as 24h`,
			},
		},
		"if windows would overlap, then every is refused": {
			window:     window(func(mw *v1.MaintenanceWindow) { mw.Spec.Every = "1h" }),
			wantErrors: []string{`spec.every: Invalid value: "1h": must not be shorter than spec.duration (2h): windows would overlap`},
		},
		"if the window is paused, then a warning says so": {
			window:   window(func(mw *v1.MaintenanceWindow) { mw.Spec.Paused = true }),
			wantWarn: "spec.paused is set: no window opens until it is unset",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := newHarness(t).ValidateCreate(t.Context(), tc.window)
			checkFieldErrors(t, res, tc.wantErrors)
			if got := strings.Join(res.Warnings, "; "); got != tc.wantWarn {
				t.Errorf("warnings %q, want %q", got, tc.wantWarn)
			}
		})
	}
}

func TestValidatorRefusesChangingTheStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	old := window()
	moved := window(func(mw *v1.MaintenanceWindow) { mw.Spec.Start = "2026-02-01T00:00:00Z" })
	checkFieldErrors(t, h.ValidateUpdate(t.Context(), old, moved),
		[]string{`spec.start: Invalid value: "2026-02-01T00:00:00Z": field is immutable: it anchors every future window; create a new MaintenanceWindow instead`})

	longer := window(func(mw *v1.MaintenanceWindow) { mw.Spec.Duration = "3h" })
	checkFieldErrors(t, h.ValidateUpdate(t.Context(), old, longer), nil)
}

func TestValidatorGuardsProtectedWindows(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	protected := window(func(mw *v1.MaintenanceWindow) {
		mw.Annotations = map[string]string{webhookv1.ProtectedAnnotation: "true"}
	})
	res := h.ValidateDelete(t.Context(), protected)
	if res.Allowed || res.Denial.Message != "MaintenanceWindow default/nightly is protected: remove the annotation examples.polyop.dev/protected to delete it" {
		t.Errorf("deleting a protected window: allowed %v, denial %+v", res.Allowed, res.Denial)
	}
	if len(res.Denial.FieldErrors) > 0 {
		t.Errorf("a refused delete has field errors: %v", res.Denial.FieldErrors)
	}
	if res := h.ValidateDelete(t.Context(), window()); !res.Allowed {
		t.Errorf("deleting an unprotected window was refused: %+v", res.Denial)
	}
}

// checkFieldErrors checks that res was refused with exactly want, or allowed
// when want is empty.
func checkFieldErrors(t *testing.T, res *sidecartest.AdmissionResponse, want []string) {
	t.Helper()
	if len(want) == 0 {
		if !res.Allowed {
			t.Errorf("refused: %+v", res.Denial)
		}
		return
	}
	if res.Allowed {
		t.Fatalf("allowed, want %q", want)
	}
	var got []string
	for _, fe := range res.Denial.FieldErrors {
		got = append(got, fe.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("field errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(res.Denial.Message, `MaintenanceWindow.examples.polyop.dev "nightly" is invalid`) {
		t.Errorf("message %q", res.Denial.Message)
	}
}
