package sidecar

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// UpdateFilter names a change an update event must carry to reconcile the
// object, after the predicates of the same name in controller-runtime. Creates
// and deletes always reconcile.
type UpdateFilter = polyopv1alpha1.UpdateFilter

const (
	// GenerationChanged passes updates that change metadata.generation: the
	// spec changed. The usual choice for a controller that writes status, as
	// status-only updates then do not reconcile again.
	// controller-runtime's predicate.GenerationChangedPredicate.
	GenerationChanged UpdateFilter = polyopv1alpha1.UpdateFilter_UPDATE_FILTER_GENERATION_CHANGED
	// LabelsChanged passes updates that change metadata.labels.
	// controller-runtime's predicate.LabelChangedPredicate.
	LabelsChanged UpdateFilter = polyopv1alpha1.UpdateFilter_UPDATE_FILTER_LABELS_CHANGED
	// AnnotationsChanged passes updates that change metadata.annotations.
	// controller-runtime's predicate.AnnotationChangedPredicate.
	AnnotationsChanged UpdateFilter = polyopv1alpha1.UpdateFilter_UPDATE_FILTER_ANNOTATIONS_CHANGED
	// DeletionChanged passes updates that change metadata.finalizers or set
	// metadata.deletionTimestamp, so that a controller filtering on generation
	// still sees its object being deleted.
	DeletionChanged UpdateFilter = polyopv1alpha1.UpdateFilter_UPDATE_FILTER_DELETION_CHANGED
)

// Builder builds a controller for objects of type T and registers it on a
// Server. Create one with NewControllerManagedBy; Complete registers it.
// Every setter returns the Builder, so a registration reads as one sentence.
type Builder[T client.Object] struct {
	srv           *Server
	forObject     T
	forSet        bool
	name          string
	updateFilters []UpdateFilter
	labelSelector string
	namespaces    []string
	maxConcurrent int
	skipUnchanged bool
	children      builderChildren // owned and watched kinds, finalizer
}

// NewControllerManagedBy returns a Builder for a controller that reconciles
// objects of type T, a pointer to a struct registered in the Server's scheme:
//
//	err := sidecar.NewControllerManagedBy[*v1.MaintenanceWindow](srv).
//		WithUpdateFilters(sidecar.GenerationChanged).
//		Complete(reconciler)
//
// T is named once, here, as with controller-runtime's
// builder.TypedControllerManagedBy: Go methods cannot take type parameters, so
// For and Complete cannot infer it.
func NewControllerManagedBy[T client.Object](srv *Server) *Builder[T] {
	return &Builder[T]{srv: srv}
}

// For sets the prototype of the reconciled objects, whose kind the controller
// declares. It is optional for a type registered in the scheme (an empty T is
// used); for *unstructured.Unstructured it is required, with the apiVersion and
// kind set, as it is the only place the kind can come from.
func (b *Builder[T]) For(obj T) *Builder[T] {
	b.forObject = obj
	b.forSet = true
	return b
}

// Named sets the controller's name, unique within the Server: lower-case
// letters, digits, '-' and '.'. It names the controller in the host's logs and
// metrics. Defaults to the kind in lower case, for example
// "maintenancewindow".
func (b *Builder[T]) Named(name string) *Builder[T] {
	b.name = name
	return b
}

// WithUpdateFilters makes update events reconcile only when at least one of
// the filters passes. Calls add to the list. Without filters every update
// reconciles, as in controller-runtime.
func (b *Builder[T]) WithUpdateFilters(filters ...UpdateFilter) *Builder[T] {
	b.updateFilters = append(b.updateFilters, filters...)
	return b
}

// WithLabelSelector limits the objects the host watches, and so reconciles, to
// those matching selector, in kubectl's -l syntax (for example
// "app=web,tier in (frontend,backend)"). Defaults to every object.
func (b *Builder[T]) WithLabelSelector(selector string) *Builder[T] {
	b.labelSelector = selector
	return b
}

// InNamespaces limits the controller to objects in these namespaces. Calls add
// to the list. Defaults to every namespace.
func (b *Builder[T]) InNamespaces(namespaces ...string) *Builder[T] {
	b.namespaces = append(b.namespaces, namespaces...)
	return b
}

// WithMaxConcurrentReconciles sets how many objects the host reconciles at
// once for this controller. Defaults to 1, as in controller-runtime.
func (b *Builder[T]) WithMaxConcurrentReconciles(n int) *Builder[T] {
	b.maxConcurrent = n
	return b
}

// WithSkipUnchangedInputs declares that the reconciler's answer is a function
// of its inputs alone: the object without its status (and without
// metadata.resourceVersion and metadata.managedFields) and the observed
// children of the kinds owned with SendObserved, status included. The host
// then skips a Reconcile call whose inputs are those of the last answer for
// the object that succeeded with no RequeueAfter, such as the call the
// host's own status write or child apply would cause. Leave it off for a
// reconciler that reads the clock, other objects through the client, or
// anything outside the cluster. Defaults to false: every reconcile calls.
func (b *Builder[T]) WithSkipUnchangedInputs(skip bool) *Builder[T] {
	b.skipUnchanged = skip
	return b
}

// Complete registers the controller, reconciled by r, on the Server. It fails
// if the type is not in the scheme, a setting is invalid, another controller
// of the Server has the same name, or the Server already serves.
func (b *Builder[T]) Complete(r Reconciler[T]) error {
	if err := b.complete(r); err != nil {
		return fmt.Errorf("sidecar: registering the controller for %s: %w", reflect.TypeFor[T](), err)
	}
	return nil
}

func (b *Builder[T]) complete(r Reconciler[T]) error {
	if b.srv == nil {
		return errors.New("the server is nil")
	}
	if r == nil {
		return errors.New("the reconciler is nil")
	}
	typ := reflect.TypeFor[T]()
	if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("the type must be a pointer to a struct, such as *v1.ConfigMap; got %s", typ)
	}
	prototype := b.forObject
	if !b.forSet || reflect.ValueOf(prototype).IsNil() {
		prototype = reflect.New(typ.Elem()).Interface().(T)
	}
	gvk, err := apiutil.GVKForObject(prototype, b.srv.Scheme())
	if err != nil {
		return fmt.Errorf("finding its kind (add the type to Options.Scheme, or pass For an object with its apiVersion and kind): %w", err)
	}

	name := b.name
	if name == "" {
		name = strings.ToLower(gvk.Kind)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("controller name %q: %s", name, strings.Join(errs, "; "))
	}

	var filters []UpdateFilter
	for _, f := range b.updateFilters {
		if _, known := polyopv1alpha1.UpdateFilter_name[int32(f)]; !known || f == polyopv1alpha1.UpdateFilter_UPDATE_FILTER_UNSPECIFIED {
			return fmt.Errorf("controller %q: %v is not an update filter", name, f)
		}
		if !slices.Contains(filters, f) {
			filters = append(filters, f)
		}
	}
	if _, err := labels.Parse(b.labelSelector); err != nil {
		return fmt.Errorf("controller %q: label selector %q: %w", name, b.labelSelector, err)
	}
	var namespaces []string
	for _, ns := range b.namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("controller %q: namespace %q: %s", name, ns, strings.Join(errs, "; "))
		}
		if !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	if b.maxConcurrent < 0 || b.maxConcurrent > math.MaxInt32 {
		return fmt.Errorf("controller %q: max concurrent reconciles must be between 0 and %d, got %d", name, math.MaxInt32, b.maxConcurrent)
	}

	desc := &polyopv1alpha1.ControllerDescription{
		Name: name,
		ForKind: &polyopv1alpha1.GroupVersionKind{
			Group:   gvk.Group,
			Version: gvk.Version,
			Kind:    gvk.Kind,
		},
		Namespaces:              namespaces,
		MaxConcurrentReconciles: int32(b.maxConcurrent),
		SkipUnchangedInputs:     b.skipUnchanged,
	}
	if len(filters) > 0 || b.labelSelector != "" {
		desc.Predicates = &polyopv1alpha1.Predicates{
			UpdateFilters: filters,
			LabelSelector: b.labelSelector,
		}
	}

	h := &typedController[T]{
		name:       name,
		gvk:        gvk,
		elem:       typ.Elem(),
		status:     statusFieldOf(typ.Elem()),
		reconciler: r,
	}
	if d, ok := r.(DeletionReconciler); ok {
		h.deletion = d
	}
	c := &controller{desc: desc, gvk: gvk, reconcile: h.reconcile}
	if err := b.children.complete(b.srv.Scheme(), desc, typ.Elem(), c, h.finalizer()); err != nil {
		return fmt.Errorf("controller %q: %w", name, err)
	}
	return b.srv.register(c)
}
