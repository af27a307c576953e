package controller

import (
	"context"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/fencing"
	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// settableFence is a Fence a test moves.
type settableFence struct {
	mu   sync.Mutex
	term fencing.Term
}

func (f *settableFence) Term() fencing.Term {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.term
}

func (f *settableFence) set(t fencing.Term) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.term = t
}

func TestAReplicaWritesOnlyUnderTheTermItBeganIn(t *testing.T) {
	t.Parallel()
	answer := &polyopv1alpha1.ReconcileResponse{
		DesiredChildren:  [][]byte{secretChild("a", "MQ==")},
		ChildrenComplete: true,
		Events:           []*polyopv1alpha1.Event{{Reason: "Reconciled", Message: "done"}},
	}
	for name, tc := range map[string]struct {
		// atStart is the fence's term when the reconcile begins;
		// duringCall, when set, the term once the sidecar has answered.
		atStart, duringCall fencing.Term
		wantCall            bool
		wantWrites          bool
	}{
		"if the replica holds its term throughout, then the answer is written": {
			atStart: heldTerm(1), wantCall: true, wantWrites: true,
		},
		"if the replica does not hold its lease, then the sidecar is not called": {
			atStart: fencing.Term{Number: 1},
		},
		"if the term ends while the sidecar computes, then its answer is discarded": {
			atStart: heldTerm(1), duringCall: fencing.Term{Number: 1}, wantCall: true,
		},
		"if a new term began while the sidecar computed (a rejoin), then its answer is discarded": {
			atStart: heldTerm(1), duringCall: heldTerm(2), wantCall: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fence := &settableFence{term: tc.atStart}
			sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
				if tc.duringCall.Number != 0 {
					fence.set(tc.duringCall)
				}
				return answer
			})}
			r, c, w := newFlow(t, "", sc, ownerMap())
			r.fence = fence
			res, err := r.Reconcile(context.Background(), req)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if called := len(sc.Reconciles()) > 0; called != tc.wantCall {
				t.Errorf("the sidecar was called: %v, want %v", called, tc.wantCall)
			}
			writes := w.take()
			if wrote := len(writes) > 0; wrote != tc.wantWrites {
				t.Errorf("writes %v, want writes: %v", writes, tc.wantWrites)
			}
			if !tc.wantWrites && res.RequeueAfter != fenceRetry {
				t.Errorf("result %+v, want the object looked at again after %s", res, fenceRetry)
			}
			err = c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "a"}, object.New(secretGVK))
			if exists := err == nil; exists != tc.wantWrites {
				t.Errorf("child a exists: %v (%v), want %v", exists, err, tc.wantWrites)
			}
		})
	}
}
