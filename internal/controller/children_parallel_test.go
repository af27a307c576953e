package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// inFlight counts the writes in flight and the most seen at once.
type inFlight struct {
	now, most atomic.Int32
}

func (f *inFlight) enter() {
	n := f.now.Add(1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			return
		}
	}
}

func (f *inFlight) leave() { f.now.Add(-1) }

// untilInFlight holds each write until want writes are in flight together
// (or a generous limit passes, for code that writes one at a time), so that
// the test sees whether the writes overlap, whatever the machine's speed.
func (f *inFlight) untilInFlight(want int32) {
	deadline := time.Now().Add(5 * time.Second)
	for f.most.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

func manyChildren(names ...string) [][]byte {
	var out [][]byte
	for _, n := range names {
		out = append(out, secretChild(n, "MQ=="))
	}
	return out
}

func TestChildrenAreAppliedConcurrentlyUpToTheLimit(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		limit    int
		children int
		want     int32
	}{
		"if the limit is 4 and 8 children change, then 4 applies are in flight at once, never more": {limit: 4, children: 8, want: 4},
		"if the limit is 1, then the children are applied one after the other":                      {limit: 1, children: 3, want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var names []string
			for i := range tc.children {
				names = append(names, fmt.Sprintf("c%d", i))
			}
			resp := &polyopv1alpha1.ReconcileResponse{DesiredChildren: manyChildren(names...), ChildrenComplete: true}
			sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse { return resp })}
			r, c, _ := newFlow(t, "", sc, ownerMap())
			r.maxConcurrentChildWrites = tc.limit
			var flight inFlight
			var applied atomic.Int32
			r.Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
				Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
					flight.enter()
					defer flight.leave()
					flight.untilInFlight(tc.want)
					applied.Add(1)
					return c.Apply(ctx, obj, opts...)
				},
			})
			if _, err := r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if got := flight.most.Load(); got != tc.want {
				t.Errorf("at most %d applies were in flight at once, want %d", got, tc.want)
			}
			if got := applied.Load(); int(got) != tc.children {
				t.Errorf("%d children applied, want %d", got, tc.children)
			}
			// Every child is remembered as applied: the same answer again
			// writes nothing.
			r.Client = c
			if _, err := r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if got := r.applied.children(req.NamespacedName, "owner-uid"); len(got) != tc.children || got[0].id.name != "c0" {
				t.Errorf("remembered %d children (%v), want %d in the answer's order", len(got), got, tc.children)
			}
		})
	}
}

func TestEveryFailedConcurrentApplyIsReportedByName(t *testing.T) {
	t.Parallel()
	resp := &polyopv1alpha1.ReconcileResponse{DesiredChildren: manyChildren("a", "bad1", "b", "bad2", "c"), ChildrenComplete: true}
	sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse { return resp })}
	r, c, w := newFlow(t, "", sc, ownerMap())
	var mu sync.Mutex
	var names []string
	r.Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				return err
			}
			name, _ := u["metadata"].(map[string]any)["name"].(string)
			mu.Lock()
			names = append(names, name)
			mu.Unlock()
			if strings.HasPrefix(name, "bad") {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, name, errors.New("not allowed"))
			}
			return c.Apply(ctx, obj, opts...) // newFlow's client counts it
		},
	})
	_, err := r.Reconcile(context.Background(), req)
	if err == nil {
		t.Fatal("the reconcile succeeded; want the two failed applies")
	}
	for _, want := range []string{`applying child Secret ns/bad1: `, `applying child Secret ns/bad2: `, "not allowed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if i, j := strings.Index(err.Error(), "bad1"), strings.Index(err.Error(), "bad2"); i > j {
		t.Errorf("error %q: the problems are not in the answer's order", err)
	}
	if got := w.take(); got["apply"] != 3 || got["delete a"]+got["delete b"]+got["delete c"] != 0 {
		t.Errorf("writes %v, want the 3 good children applied and nothing pruned", got)
	}
	if len(names) != 5 {
		t.Errorf("applies tried %v, want all 5 children", names)
	}
	// The children applied are remembered; the failed ones are applied
	// again on the retry.
	r.Client = c
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); got["apply"] != 2 {
		t.Errorf("the retry wrote %v, want the 2 failed children applied", got)
	}
}

func TestNamespacesAndCRDsAreWrittenFirst(t *testing.T) {
	t.Parallel()
	gvks := []schema.GroupVersionKind{
		configMapGVK,
		{Version: "v1", Kind: "Namespace"},
		secretGVK,
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
		roleGVK,
	}
	var tiers [][]int
	byTier([]int{0, 1, 2, 3, 4}, func(i int) int { return writeTier(gvks[i]) }, func(items []int) { tiers = append(tiers, items) })
	if fmt.Sprint(tiers) != "[[1 3] [0 2 4]]" {
		t.Errorf("tiers %v, want the Namespace and the CRD, then the others, each in the answer's order", tiers)
	}
}

func TestInParallelRaisesAPanicInTheCaller(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	defer func() {
		if p := recover(); p != "boom" {
			t.Errorf("recovered %v, want boom", p)
		}
		if calls.Load() != 6 {
			t.Errorf("%d calls returned before the panic was raised, want all 6", calls.Load())
		}
	}()
	inParallel(6, 3, func(i int) {
		defer calls.Add(1)
		if i == 2 {
			panic("boom")
		}
	})
}
