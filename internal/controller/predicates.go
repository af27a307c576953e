package controller

import (
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// updateFilterPredicates maps each declared UpdateFilter onto its
// controller-runtime predicate. An update passes when any of them passes;
// creates, deletes and generic events always pass.
func updateFilterPredicates(filters []polyopv1alpha1.UpdateFilter) []predicate.Predicate {
	if len(filters) == 0 {
		return nil
	}
	var or []predicate.Predicate
	for _, f := range filters {
		switch f {
		case polyopv1alpha1.UpdateFilter_UPDATE_FILTER_GENERATION_CHANGED:
			or = append(or, predicate.GenerationChangedPredicate{})
		case polyopv1alpha1.UpdateFilter_UPDATE_FILTER_LABELS_CHANGED:
			or = append(or, predicate.LabelChangedPredicate{})
		case polyopv1alpha1.UpdateFilter_UPDATE_FILTER_ANNOTATIONS_CHANGED:
			or = append(or, predicate.AnnotationChangedPredicate{})
		case polyopv1alpha1.UpdateFilter_UPDATE_FILTER_DELETION_CHANGED:
			or = append(or, deletionChanged)
		}
	}
	return []predicate.Predicate{predicate.Or(or...)}
}

// withLabelUpdates lets an update that changes any of keys' labels through
// the update filters preds (as updateFilterPredicates returns them): preds
// when there are no filters or no keys.
func withLabelUpdates(preds []predicate.Predicate, keys []string) []predicate.Predicate {
	if len(preds) == 0 || len(keys) == 0 {
		return preds
	}
	return []predicate.Predicate{predicate.Or(append(slices.Clone(preds), labelsChanged(keys))...)}
}

// labelsChanged lets an update through when one of keys' labels changed.
func labelsChanged(keys []string) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			oldLabels, newLabels := e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()
			for _, k := range keys {
				o, had := oldLabels[k]
				n, has := newLabels[k]
				if had != has || o != n {
					return true
				}
			}
			return false
		},
	}
}

// deletionChanged lets an update through when the object started being
// deleted or its finalizers changed.
var deletionChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return false
		}
		if e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() {
			return true
		}
		return !slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
	},
}
