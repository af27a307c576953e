package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/object"
)

// ControllerLabel is the label the host sets on every child it applies, to
// the controller's name (a DNS subdomain of at most 63 characters, so always
// a valid label value). Together with the controller owner reference it tells
// the children the host applied, which it may prune, from objects someone
// else made a child by hand, which it never deletes: the cache drops
// managedFields, which would tell the same.
const ControllerLabel = "polyop.dev/controller"

// ChildKind is a kind a controller owns, resolved.
type ChildKind struct {
	// GVK is the child kind.
	GVK schema.GroupVersionKind
	// Namespaced is true for a kind that lives in namespaces.
	Namespaced bool
	// SendObserved puts the observed children of this kind in every
	// ReconcileRequest.
	SendObserved bool
	// Adopt lets the host apply a desired child over an existing object of
	// this kind that has no controller owner, which makes it a child.
	Adopt bool
	// ReplaceOnImmutable lets the host delete and create again a child whose
	// apply the API server refuses because it changes an immutable field.
	ReplaceOnImmutable bool
}

// childID names one child.
type childID struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

func (id childID) String() string {
	if id.namespace == "" {
		return fmt.Sprintf("%s %q", id.gvk.Kind, id.name)
	}
	return fmt.Sprintf("%s %s/%s", id.gvk.Kind, id.namespace, id.name)
}

func idOf(obj client.Object) childID {
	return childID{gvk: obj.GetObjectKind().GroupVersionKind(), namespace: obj.GetNamespace(), name: obj.GetName()}
}

// observedChildren lists, from the cache, the children of every owned kind
// whose controller owner is owner, sorted by kind and name.
//
// The children are the cache's own objects, not copies: they must not be
// modified.
func (r *Reconciler) observedChildren(ctx context.Context, owner client.Object) ([]*object.Object, error) {
	var out []*object.Object
	byOwner := client.MatchingFields{OwnerIndex: string(owner.GetUID())}
	for _, k := range r.Children {
		list := object.NewList(k.GVK)
		opts := make([]client.ListOption, 0, 3)
		opts = append(opts, byOwner, client.UnsafeDisableDeepCopy)
		if k.Namespaced {
			opts = append(opts, client.InNamespace(owner.GetNamespace()))
		}
		if err := r.Client.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing the %s children of %s %s/%s from the cache: %w", k.GVK.Kind, owner.GetObjectKind().GroupVersionKind().Kind, owner.GetNamespace(), owner.GetName(), err)
		}
		for i := range list.Items {
			c := &list.Items[i]
			c.SetGroupVersionKind(k.GVK)
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(x, y *object.Object) int {
		a, b := idOf(x), idOf(y)
		if a.gvk != b.gvk {
			return strings.Compare(a.gvk.String(), b.gvk.String())
		}
		if a.namespace != b.namespace {
			return strings.Compare(a.namespace, b.namespace)
		}
		return strings.Compare(a.name, b.name)
	})
	return out, nil
}
