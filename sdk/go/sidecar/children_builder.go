package sidecar

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// OwnsOption changes how a controller owns a kind of children.
type OwnsOption interface {
	applyToOwns(*owned)
}

type ownsOptionFunc func(*owned)

func (f ownsOptionFunc) applyToOwns(o *owned) { f(o) }

// SendObserved makes the host send, with every reconcile, the children of
// the owned kind whose controller owner reference points at the reconciled
// object, from its cache. ObservedChildren returns them.
func SendObserved() OwnsOption {
	return ownsOptionFunc(func(o *owned) { o.sendObserved = true })
}

// Adopt lets the host adopt an existing object of the owned kind that a
// desired child names and that no object controls (for example a ConfigMap
// someone created by hand): the host applies the child over it, which makes
// the reconciled object its controller owner and merges the child's fields
// into it. From then on it is a child like any other: it is updated, and
// pruned (deleted) once it is no longer desired. Without Adopt (the default)
// the host refuses such an object: nothing is written to it, the reconcile
// fails and a Warning event names the object. An object another object
// controls is never adopted.
func Adopt() OwnsOption {
	return ownsOptionFunc(func(o *owned) { o.adopt = true })
}

// ReplaceOnImmutable lets the host replace a child of the owned kind whose
// apply the API server refuses because it changes an immutable field (a
// Pod's spec, a Job's spec.template): the host deletes the child, with its
// UID as a precondition, and applies the desired child again, which creates
// it. Without ReplaceOnImmutable (the default) the child is left as it is,
// the reconcile fails and a Warning event names the child and the field.
func ReplaceOnImmutable() OwnsOption {
	return ownsOptionFunc(func(o *owned) { o.replaceOnImmutable = true })
}

// WatchMapping says how an object of a watched kind names the reconciled
// objects its events concern. MapByLabel, MapByAnnotation and MapByField
// return one.
type WatchMapping struct {
	label, annotation, field string
}

// MapByLabel maps a watched object to the reconciled object, in its
// namespace, named by the value of the label key.
func MapByLabel(key string) WatchMapping { return WatchMapping{label: key} }

// MapByAnnotation maps a watched object to the reconciled object, in its
// namespace, named by the value of the annotation key.
func MapByAnnotation(key string) WatchMapping { return WatchMapping{annotation: key} }

// MapByField maps a watched object to every reconciled object, in its
// namespace, whose field at fieldPath (dot-separated, for example
// "spec.configMapName") holds the watched object's name. The host indexes the
// field in its cache, so an event costs no scan.
func MapByField(fieldPath string) WatchMapping { return WatchMapping{field: fieldPath} }

// owned is one Owns call.
type owned struct {
	obj                                     client.Object
	sendObserved, adopt, replaceOnImmutable bool
}

// watched is one Watches call.
type watched struct {
	obj     client.Object
	mapping WatchMapping
}

// builderChildren is what a Builder declares about other objects: the kinds
// it owns, the kinds it watches and its finalizer.
type builderChildren struct {
	owns      []owned
	watches   []watched
	finalizer string
}

// Owns declares that the controller owns children of obj's kind, as
// controller-runtime's Owns: an event on a child whose controller owner
// reference points at a reconciled object reconciles that object. The desired
// children a reconcile returns (Desire) must be of owned kinds. obj is a
// prototype, a typed object in the scheme or an *unstructured.Unstructured
// with its apiVersion and kind.
func (b *Builder[T]) Owns(obj client.Object, opts ...OwnsOption) *Builder[T] {
	o := owned{obj: obj}
	for _, opt := range opts {
		opt.applyToOwns(&o)
	}
	b.children.owns = append(b.children.owns, o)
	return b
}

// Watches declares that events on objects of obj's kind reconcile the objects
// that mapping names, as controller-runtime's Watches with a map function;
// the host does the mapping, without a call to the sidecar.
func (b *Builder[T]) Watches(obj client.Object, mapping WatchMapping) *Builder[T] {
	b.children.watches = append(b.children.watches, watched{obj: obj, mapping: mapping})
	return b
}

// WithFinalizer declares a finalizer (a qualified name with a domain, for
// example "example.com/cleanup") that the host adds to every reconciled
// object. When such an object is being deleted, the host calls the
// reconciler's Finalize (see FinalizeReconciler) instead of Reconcile, and
// removes the finalizer once Finalize succeeds. The reconciler must
// implement FinalizeReconciler[T].
func (b *Builder[T]) WithFinalizer(name string) *Builder[T] {
	b.children.finalizer = name
	return b
}

// complete adds the declarations to desc and c, once the rest of the
// controller is built.
func (bc *builderChildren) complete(scheme *runtime.Scheme, desc *polyopv1alpha1.ControllerDescription, forType reflect.Type, c *controller, finalize func(ctx context.Context, req Request, object []byte) (*polyopv1alpha1.FinalizeResponse, error)) error {
	var errs []error
	seen := map[schema.GroupVersionKind]bool{}
	for _, o := range bc.owns {
		gvk, err := prototypeKind(o.obj, scheme)
		if err != nil {
			errs = append(errs, fmt.Errorf("Owns: %w", err))
			continue
		}
		if seen[gvk] {
			errs = append(errs, fmt.Errorf("Owns: %s is owned twice", gvk.Kind))
			continue
		}
		seen[gvk] = true
		desc.Owns = append(desc.Owns, &polyopv1alpha1.OwnedKind{
			Kind: gvkProto(gvk), SendObserved: o.sendObserved, Adopt: o.adopt, ReplaceOnImmutable: o.replaceOnImmutable,
		})
	}
	for _, w := range bc.watches {
		gvk, err := prototypeKind(w.obj, scheme)
		if err != nil {
			errs = append(errs, fmt.Errorf("Watches: %w", err))
			continue
		}
		watch := &polyopv1alpha1.Watch{Kind: gvkProto(gvk)}
		m := w.mapping
		switch {
		case m.label != "" && m.annotation == "" && m.field == "":
			if msgs := validation.IsQualifiedName(m.label); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("Watches %s: label %q: %s", gvk.Kind, m.label, strings.Join(msgs, "; ")))
			}
			watch.Mapping = &polyopv1alpha1.Watch_Label{Label: m.label}
		case m.annotation != "" && m.label == "" && m.field == "":
			if msgs := validation.IsQualifiedName(m.annotation); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("Watches %s: annotation %q: %s", gvk.Kind, m.annotation, strings.Join(msgs, "; ")))
			}
			watch.Mapping = &polyopv1alpha1.Watch_Annotation{Annotation: m.annotation}
		case m.field != "" && m.label == "" && m.annotation == "":
			if err := checkFieldPath(forType, m.field); err != nil {
				errs = append(errs, fmt.Errorf("Watches %s: field %q: %w", gvk.Kind, m.field, err))
			}
			watch.Mapping = &polyopv1alpha1.Watch_FieldPath{FieldPath: m.field}
		default:
			errs = append(errs, fmt.Errorf("Watches %s: the mapping is empty: use MapByLabel, MapByAnnotation or MapByField", gvk.Kind))
		}
		desc.Watches = append(desc.Watches, watch)
	}
	if bc.finalizer != "" {
		if msgs := validation.IsQualifiedName(bc.finalizer); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("finalizer %q: %s", bc.finalizer, strings.Join(msgs, "; ")))
		} else if !strings.Contains(bc.finalizer, "/") {
			errs = append(errs, fmt.Errorf("finalizer %q needs a domain prefix, for example example.com/%s", bc.finalizer, bc.finalizer))
		}
		if finalize == nil {
			errs = append(errs, fmt.Errorf("finalizer %q: the reconciler does not implement FinalizeReconciler, so nothing would finalize the objects", bc.finalizer))
		}
		desc.Finalizer = bc.finalizer
		c.finalize = finalize
	}
	return errors.Join(errs...)
}

// prototypeKind is the kind of a prototype object: from the scheme, or its
// own for unstructured objects.
func prototypeKind(obj client.Object, scheme *runtime.Scheme) (schema.GroupVersionKind, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return schema.GroupVersionKind{}, errors.New("the object is nil")
	}
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("finding the kind of %T (add the type to Options.Scheme, or pass an object with its apiVersion and kind): %w", obj, err)
	}
	return gvk, nil
}

func gvkProto(gvk schema.GroupVersionKind) *polyopv1alpha1.GroupVersionKind {
	return &polyopv1alpha1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
}

// checkFieldPath checks that path names a string field of the struct t, by
// the fields' JSON names. Types it cannot see into (maps of anything but
// strings, interfaces, unstructured objects) pass.
func checkFieldPath(t reflect.Type, path string) error {
	segments := strings.Split(path, ".")
	for _, s := range segments {
		if s == "" {
			return errors.New("not a dot-separated field path such as spec.configMapName")
		}
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[runtime.Unstructured]()) {
		return nil
	}
	for i, s := range segments {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := jsonField(t, s)
			if !ok {
				return fmt.Errorf("%s has no field %q", t, strings.Join(segments[:i+1], "."))
			}
			t = f
		case reflect.Map:
			if t.Key().Kind() != reflect.String {
				return fmt.Errorf("%q is a map without string keys", strings.Join(segments[:i], "."))
			}
			t = t.Elem()
		case reflect.Interface:
			return nil
		default:
			return fmt.Errorf("%q is a %s, not an object", strings.Join(segments[:i], "."), t)
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.String && t.Kind() != reflect.Interface {
		return fmt.Errorf("the field is a %s; it must hold a name, a string", t)
	}
	return nil
}

// jsonField finds the field of the struct t whose JSON name is name, looking
// into inlined embedded structs as encoding/json does.
func jsonField(t reflect.Type, name string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tagName, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tagName == "-" {
			continue
		}
		if f.Anonymous && tagName == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if typ, ok := jsonField(ft, name); ok {
					return typ, true
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if tagName == "" {
			tagName = f.Name
		}
		if tagName == name {
			return f.Type, true
		}
	}
	return nil, false
}
