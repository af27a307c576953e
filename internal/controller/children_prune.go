package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/polyop/polyop/internal/object"
)

// pruneChildren deletes the observed children that are not among applied,
// the children just applied, and that the host applied (see appliedByHost),
// with their UID as a precondition, so that nothing recreated meanwhile is
// lost. The deletes run concurrently, at most maxConcurrentChildWrites at a
// time. It counts them in res, and adds a problem for each it could not
// delete or tell about, in the order of observed.
func (r *Reconciler) pruneChildren(ctx context.Context, observed []*object.Object, applied []appliedChild, res *childResult) {
	var gone []*object.Object
	for _, o := range observed {
		if _, ok := findApplied(applied, idOf(o)); !ok {
			gone = append(gone, o)
		}
	}
	// Each prune's outcome, at its index: pruned, or a problem, or neither
	// (a child the host did not apply, which stays).
	pruned := make([]bool, len(gone))
	problems := make([]*childProblem, len(gone))
	inParallel(len(gone), r.maxConcurrentChildWrites, func(i int) {
		pruned[i], problems[i] = r.pruneChild(ctx, gone[i])
	})
	for i, o := range gone {
		switch {
		case problems[i] != nil:
			res.problems = append(res.problems, *problems[i])
		case pruned[i]:
			res.pruned++
			r.countChild(idOf(o).gvk, childPruned)
		}
	}
}

// pruneChild deletes o, a child that is no longer desired, if the host
// applied it; pruned says whether it did.
func (r *Reconciler) pruneChild(ctx context.Context, o *object.Object) (pruned bool, problem *childProblem) {
	id := idOf(o)
	ours, err := r.appliedByHost(ctx, o)
	if err != nil {
		return false, &childProblem{reason: reasonChildrenNotApplied, err: err}
	}
	if !ours {
		logf.FromContext(ctx).V(1).Info("leaving a child that is no longer desired: the host did not apply it", "child", id.String())
		return false, nil
	}
	spanCtx, span := r.startWrite(ctx, spanPruneChild, childAttribute.String(id.String()))
	err = r.write(spanCtx, func(ctx context.Context) error {
		return r.Client.Delete(ctx, o, client.Preconditions{UID: ptr.To(o.GetUID())}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	if apierrors.IsNotFound(err) {
		endSpan(span, nil)
	} else {
		endSpan(span, err)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return false, &childProblem{reason: reasonChildrenNotApplied, err: fmt.Errorf("deleting child %s, which is no longer desired: %w", id, err)}
	}
	return true, nil
}

// appliedByHost reports whether the host applied o, a child the owner
// controls that is no longer desired. The label tells, or else (the cache
// drops managedFields, unless the host keeps them) the object as the API
// server holds it, read only for such a child.
func (r *Reconciler) appliedByHost(ctx context.Context, o *object.Object) (bool, error) {
	if appliedByHost(o, r.Controller.Name, r.fieldManager()) {
		return true, nil
	}
	if r.keepManagedFields || r.APIReader == nil {
		return false, nil
	}
	live := object.New(o.GroupVersionKind())
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, live)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading child %s, which is no longer desired, to tell whether the host applied it: %w", idOf(o), err)
	}
	return live.GetUID() == o.GetUID() && appliedByHost(live, r.Controller.Name, r.fieldManager()), nil
}
