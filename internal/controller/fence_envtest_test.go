package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/fencing"
)

// heldTerm is a term of an hour.
func heldTerm(n uint64) fencing.Term {
	return fencing.Term{Number: n, Until: time.Now().Add(time.Hour), Held: true, Lease: "shard Lease ns/test"}
}

// A fenced replica applies a child with the version it read as a
// precondition: the API server refuses a version someone wrote since.
func TestAFencedReplicasChildApplyCarriesTheVersionItRead(t *testing.T) {
	t.Parallel()
	r, g, c, _ := childrenOf(t)
	r.APIReader = c
	plain := plainClient(t)
	term := heldTerm(1)
	r.fence = fencing.Func(func() fencing.Term { return term })
	ctx := fencing.WithTerm(context.Background(), term)
	key := client.ObjectKey{Namespace: g.GetNamespace(), Name: "fenced"}
	apply := func(data string, existing client.Object, precondition string) *childProblem {
		t.Helper()
		desired, err := validateChildren([][]byte{configMapChild("fenced", map[string]string{"v": data})}, g, r.Controller.Name, r.Children)
		if err != nil {
			t.Fatal(err)
		}
		_, _, p := r.applyChild(ctx, g, desired[0], existing, precondition)
		return p
	}
	read := func() *corev1.ConfigMap {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := plain.Get(context.Background(), key, cm); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	if p := apply("1", nil, ""); p != nil {
		t.Fatal(p.err)
	}
	first := read()

	// Another writer (the new owner of the object, here the same field
	// manager) writes the child since.
	second := first.DeepCopy()
	second.Data["v"] = "2"
	if err := plain.Update(context.Background(), second); err != nil {
		t.Fatal(err)
	}

	t.Run("if the child changed since the version read, then the apply with that version is refused", func(t *testing.T) {
		desired, err := validateChildren([][]byte{configMapChild("fenced", map[string]string{"v": "stale"})}, g, r.Controller.Name, r.Children)
		if err != nil {
			t.Fatal(err)
		}
		out := desired[0].configuration()
		out.precondition = first.ResourceVersion
		err = c.Apply(context.Background(), out, client.FieldOwner(r.fieldManager()), client.ForceOwnership)
		if !apierrors.IsConflict(err) {
			t.Fatalf("an apply preconditioned on %s after the child moved on: %v, want a conflict", first.ResourceVersion, err)
		}
		if got := read().Data["v"]; got != "2" {
			t.Errorf("the child's v is %q after the refused apply, want the newer write's 2", got)
		}
	})

	t.Run("if the replica still holds its term, then a refused apply reads the child again and applies once more", func(t *testing.T) {
		if p := apply("3", first, first.ResourceVersion); p != nil {
			t.Fatalf("apply: %v", p.err)
		}
		if got := read().Data["v"]; got != "3" {
			t.Errorf("the child's v is %q, want 3", got)
		}
	})

	t.Run("if the term ended, then nothing is written and the problem says why", func(t *testing.T) {
		term = heldTerm(2)
		p := apply("4", read(), read().ResourceVersion)
		if p == nil || !fencing.IsLapsed(p.err) || !strings.Contains(p.err.Error(), "term 1 of shard Lease ns/test") {
			t.Fatalf("apply after the term ended: %+v, want a lapse naming the term", p)
		}
		if got := read().Data["v"]; got != "3" {
			t.Errorf("the child's v is %q, want it left at 3", got)
		}
	})
}
