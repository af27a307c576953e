package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		resp           *polyopv1alpha1.ReconcileResponse
		want           reconcile.Result
		wantErr        string
		wantTerminal   bool
		wantRetryAfter time.Duration
	}{
		"if the sidecar says nothing, the object is done": {
			resp: &polyopv1alpha1.ReconcileResponse{},
		},
		"if it asks for a requeue after a duration, the result carries it": {
			resp: &polyopv1alpha1.ReconcileResponse{RequeueAfter: durationpb.New(90 * time.Second)},
			want: reconcile.Result{RequeueAfter: 90 * time.Second},
		},
		"if it reports an error, the error is transient and requeue_after beside it is ignored": {
			resp:    &polyopv1alpha1.ReconcileResponse{Error: &polyopv1alpha1.Failure{Message: "boom"}, RequeueAfter: durationpb.New(time.Second)},
			wantErr: "the sidecar reported: boom",
		},
		"if it reports an error with retry_after, the error carries it": {
			resp:           &polyopv1alpha1.ReconcileResponse{Error: &polyopv1alpha1.Failure{Message: "busy", RetryAfter: durationpb.New(2 * time.Second)}},
			wantErr:        "the sidecar reported: busy (retry after 2s)",
			wantRetryAfter: 2 * time.Second,
		},
		"if retry_after is not positive, the error backs off": {
			resp:    &polyopv1alpha1.ReconcileResponse{Error: &polyopv1alpha1.Failure{Message: "busy", RetryAfter: durationpb.New(-time.Second)}},
			wantErr: "the sidecar reported: busy",
		},
		"if it reports a terminal error, it is a reconcile.TerminalError": {
			resp:         &polyopv1alpha1.ReconcileResponse{Error: &polyopv1alpha1.Failure{Message: "never", Terminal: true}},
			wantErr:      "the sidecar reported: never",
			wantTerminal: true,
		},
		"if a terminal error has a retry_after, it is a transient error naming the contradiction": {
			resp:    &polyopv1alpha1.ReconcileResponse{Error: &polyopv1alpha1.Failure{Message: "never", Terminal: true, RetryAfter: durationpb.New(time.Second)}},
			wantErr: "error is terminal (never retried) and has a retry_after of 1s (retried then)",
		},
		"if retry_after is out of range, it is an error": {
			resp:    &polyopv1alpha1.ReconcileResponse{Error: &polyopv1alpha1.Failure{Message: "m", RetryAfter: &durationpb.Duration{Seconds: 1, Nanos: -5}}},
			wantErr: "error.retry_after is not a valid duration",
		},
		"if requeue_after is out of range, it is an error": {
			resp:    &polyopv1alpha1.ReconcileResponse{RequeueAfter: &durationpb.Duration{Seconds: 1, Nanos: -5}},
			wantErr: "invalid requeue_after",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := decide(tc.resp)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
			if terminal := errors.Is(err, reconcile.TerminalError(nil)); terminal != tc.wantTerminal {
				t.Errorf("terminal = %v, want %v", terminal, tc.wantTerminal)
			}
			var f *sidecarFailure
			if errors.As(err, &f) && f.retryAfter != tc.wantRetryAfter || !errors.As(err, &f) && tc.wantRetryAfter != 0 {
				t.Errorf("error %#v, want a retry after %s", err, tc.wantRetryAfter)
			}
			if got != tc.want {
				t.Errorf("result = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestUpdateFilterPredicates(t *testing.T) {
	t.Parallel()
	obj := func(gen int64, labels map[string]string, deleting bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGeneration(gen)
		u.SetLabels(labels)
		if deleting {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
		}
		return u
	}
	gen := polyopv1alpha1.UpdateFilter_UPDATE_FILTER_GENERATION_CHANGED
	lbl := polyopv1alpha1.UpdateFilter_UPDATE_FILTER_LABELS_CHANGED
	del := polyopv1alpha1.UpdateFilter_UPDATE_FILTER_DELETION_CHANGED
	for name, tc := range map[string]struct {
		filters  []polyopv1alpha1.UpdateFilter
		old, new *unstructured.Unstructured
		want     bool
	}{
		"without filters every update passes":               {old: obj(1, nil, false), new: obj(1, nil, false), want: true},
		"a generation filter drops a status-only update":    {filters: []polyopv1alpha1.UpdateFilter{gen}, old: obj(1, nil, false), new: obj(1, nil, false)},
		"a generation filter passes a spec change":          {filters: []polyopv1alpha1.UpdateFilter{gen}, old: obj(1, nil, false), new: obj(2, nil, false), want: true},
		"filters are or-ed: a label change passes":          {filters: []polyopv1alpha1.UpdateFilter{gen, lbl}, old: obj(1, nil, false), new: obj(1, map[string]string{"a": "b"}, false), want: true},
		"a deletion filter passes the start of a deletion":  {filters: []polyopv1alpha1.UpdateFilter{gen, del}, old: obj(1, nil, false), new: obj(1, nil, true), want: true},
		"a deletion filter drops an update that is neither": {filters: []polyopv1alpha1.UpdateFilter{del}, old: obj(1, nil, true), new: obj(1, nil, true)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			preds := updateFilterPredicates(tc.filters)
			got := true
			for _, p := range preds {
				got = got && p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new})
				if !p.Create(event.CreateEvent{Object: tc.new}) || !p.Delete(event.DeleteEvent{Object: tc.new}) {
					t.Errorf("creates and deletes must always pass")
				}
			}
			if got != tc.want {
				t.Errorf("update passes = %v, want %v", got, tc.want)
			}
		})
	}
}
