package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	"github.com/polyop/polyop/sdk/go/conditions"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

// harness returns a harness for a testsidecar built from args, and the path of
// its call log.
func harness(t *testing.T, args ...string) (*sidecartest.Harness, string) {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), "calls.jsonl")
	cfg, err := parseFlags(append([]string{"--log-file", logFile}, args...), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cfg.sidecar.Logger = testr.New(t)
	srv, calls, err := newServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = calls.Close() })
	return sidecartest.New(t, srv), logFile
}

func window(annotations map[string]string) *v1.MaintenanceWindow {
	return &v1.MaintenanceWindow{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: "w", Generation: 2, ResourceVersion: "41", Annotations: annotations,
		},
		Spec: v1.MaintenanceWindowSpec{Start: "2026-01-01T00:00:00Z", Duration: "1h"},
	}
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		window  *v1.MaintenanceWindow
		retries int

		wantErr          string // "" for success
		wantTerminal     bool
		wantRequeueAfter time.Duration
		wantReconciled   bool
		wantEvents       []string
	}{
		"if there are no annotations, then the window is Reconciled with an event": {
			window:         window(nil),
			wantReconciled: true, wantEvents: []string{"Normal/Reconciled"},
		},
		"if the generation was observed already, then no event is recorded": {
			window: func() *v1.MaintenanceWindow {
				w := window(nil)
				w.Status.ObservedGeneration = 2
				return w
			}(),
			wantReconciled: true,
		},
		"if fail-times is 2 and this is the first attempt, then it fails transiently": {
			window:  window(map[string]string{annotationFailTimes: "2"}),
			wantErr: "injected failure",
		},
		"if fail-times is 2 and this is the second retry, then it succeeds": {
			window:         window(map[string]string{annotationFailTimes: "2"}),
			retries:        2,
			wantReconciled: true, wantEvents: []string{"Normal/Reconciled"},
		},
		"if fail-times is not a number, then it fails terminally": {
			window:  window(map[string]string{annotationFailTimes: "twice"}),
			wantErr: `annotation e2e.polyop.dev/fail-times: "twice" is not a number`, wantTerminal: true,
		},
		"if terminal is set, then it fails terminally with that message": {
			window:  window(map[string]string{annotationTerminal: "the spec is wrong"}),
			wantErr: "the spec is wrong", wantTerminal: true,
		},
		"if requeue-after is set, then it is reconciled and requeued": {
			window:           window(map[string]string{annotationRequeueAfter: "500ms"}),
			wantRequeueAfter: 500 * time.Millisecond,
			wantReconciled:   true, wantEvents: []string{"Normal/Reconciled"},
		},
		"if requeue-after is not a duration, then it fails terminally": {
			window:  window(map[string]string{annotationRequeueAfter: "soon"}),
			wantErr: `annotation e2e.polyop.dev/requeue-after: "soon" is not a duration`, wantTerminal: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, _ := harness(t)
			res := h.Reconcile(t.Context(), "maintenancewindow", tc.window, sidecartest.WithRetries(tc.retries))

			switch {
			case tc.wantErr == "" && res.Err != nil:
				t.Errorf("unexpected error: %+v", *res.Err)
			case tc.wantErr != "" && (res.Err == nil || res.Err.Message != tc.wantErr || res.Err.Terminal != tc.wantTerminal):
				t.Errorf("error = %+v, want %q (terminal: %v)", res.Err, tc.wantErr, tc.wantTerminal)
			}
			if res.Result.RequeueAfter != tc.wantRequeueAfter {
				t.Errorf("requeue after = %s, want %s", res.Result.RequeueAfter, tc.wantRequeueAfter)
			}
			var events []string
			for _, e := range res.Events {
				events = append(events, e.Type+"/"+e.Reason)
			}
			if !slices.Equal(events, tc.wantEvents) {
				t.Errorf("events = %v, want %v", events, tc.wantEvents)
			}
			var got v1.MaintenanceWindow
			res.Status(&got)
			reconciled := got.Status.Phase == PhaseReconciled && got.Status.ObservedGeneration == 2 &&
				conditions.IsTrue(got.Status.Conditions, conditions.Ready)
			if reconciled != tc.wantReconciled {
				t.Errorf("reconciled = %v, want %v (status %+v)", reconciled, tc.wantReconciled, got.Status)
			}
		})
	}
}

func readCalls(t *testing.T, path string) []call {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var calls []call
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		var c call
		if err := json.Unmarshal(scanner.Bytes(), &c); err != nil {
			t.Fatalf("line %q: %v", scanner.Text(), err)
		}
		if _, err := time.Parse(time.RFC3339Nano, c.Time); err != nil {
			t.Errorf("time %q: %v", c.Time, err)
		}
		c.Time = ""
		calls = append(calls, c)
	}
	return calls
}

func TestTheCallLogHasALinePerCall(t *testing.T) {
	t.Parallel()
	h, logFile := harness(t)
	h.Reconcile(t.Context(), "maintenancewindow", window(map[string]string{annotationFailTimes: "1"}))
	h.Reconcile(t.Context(), "maintenancewindow", window(map[string]string{annotationFailTimes: "1"}), sidecartest.WithRetries(1))
	h.ReconcileDeleted(t.Context(), "maintenancewindow", types.NamespacedName{Namespace: "default", Name: "w"})

	want := []call{
		{Namespace: "default", Name: "w", Exists: true, Generation: 2, ResourceVersion: "41", Retries: 0},
		{Namespace: "default", Name: "w", Exists: true, Generation: 2, ResourceVersion: "41", Retries: 1},
		{Namespace: "default", Name: "w", Exists: false},
	}
	if got := readCalls(t, logFile); !slices.Equal(got, want) {
		t.Errorf("calls = %+v, want %+v", got, want)
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"exists":false`) {
		t.Errorf("a deletion's line does not say exists false: %s", data)
	}
}

func TestDelayStopsWithTheCall(t *testing.T) {
	t.Parallel()
	h, _ := harness(t, "--delay", "1h")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	res := h.Reconcile(ctx, "maintenancewindow", window(nil))
	if res.Err == nil || res.Err.Terminal || !strings.Contains(res.Err.Message, "deadline exceeded") {
		t.Errorf("error = %+v, want the call's deadline", res.Err)
	}
}

func TestOverlapDetectorRecordsAReconcileOfAnObjectInFlight(t *testing.T) {
	d := overlapDetector(t.TempDir())
	release, err := d.begin("ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.begin("ns", "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(string(d), "overlaps.log")); !os.IsNotExist(err) {
		t.Fatalf("two objects in flight recorded an overlap (%v)", err)
	}
	if _, err := d.begin("ns", "a"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(string(d), "overlaps.log"))
	if err != nil || !strings.Contains(string(got), "ns/a: reconciled by") {
		t.Fatalf("overlaps.log = %q, %v; want the overlap of ns/a", got, err)
	}
	release()
	other()
	if _, err := d.begin("ns", "a"); err != nil {
		t.Fatal(err)
	}
	if got2, _ := os.ReadFile(filepath.Join(string(d), "overlaps.log")); string(got2) != string(got) {
		t.Errorf("a reconcile after the last one ended recorded an overlap: %q", got2)
	}
}

func TestAnInstanceNamesItselfAndDesiresAConfigMap(t *testing.T) {
	t.Parallel()
	h, logFile := harness(t, "--instance", "host-1", "--child-configmap")
	owns := h.Describe().GetControllers()[0].GetOwns()
	if len(owns) != 1 || owns[0].GetKind().GetKind() != "ConfigMap" {
		t.Errorf("owns = %v, want ConfigMaps", owns)
	}
	res := h.Reconcile(t.Context(), "maintenancewindow", window(nil))
	if res.Err != nil {
		t.Fatalf("unexpected error: %+v", *res.Err)
	}
	children := res.DesiredChildren()
	if len(children) != 1 || children[0].GetKind() != "ConfigMap" || children[0].GetName() != "w" || children[0].GetNamespace() != "default" {
		t.Errorf("desired children = %v, want the ConfigMap default/w", children)
	}
	var got v1.MaintenanceWindow
	res.Status(&got)
	if c := conditions.Get(got.Status.Conditions, conditions.Ready); c == nil || c.Message != "Reconciled by host-1" {
		t.Errorf("Ready = %+v, want the message to name the instance", c)
	}
	if calls := readCalls(t, logFile); len(calls) != 1 || calls[0].Instance != "host-1" {
		t.Errorf("calls = %+v, want one by host-1", calls)
	}
}
