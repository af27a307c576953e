package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	sigsjson "sigs.k8s.io/json"

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
// namespace, whose field at path (dot-separated, for example
// "spec.configMapName") holds the watched object's name. The host indexes the
// field in its cache, so an event costs no scan.
func MapByField(path string) WatchMapping { return WatchMapping{field: path} }

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

// reconcileState is what a reconcile collects besides its result: the
// observed children it was sent and the desired children it declares.
type reconcileState struct {
	scheme     *runtime.Scheme
	controller string
	namespace  string // the reconciled object's
	owns       []*polyopv1alpha1.OwnedKind
	observed   [][]byte

	mu          sync.Mutex
	desired     []desiredChild
	complete    bool
	leaveStatus bool
}

type desiredChild struct {
	gvk             schema.GroupVersionKind
	namespace, name string
	data            []byte
}

type reconcileStateKey struct{}

// withReconcileState returns a context carrying the state of a reconcile by
// c of the object req names, which was sent with the observed children.
func (s *Server) withReconcileState(ctx context.Context, c *controller, req Request, observed [][]byte) (context.Context, *reconcileState) {
	st := &reconcileState{
		scheme:     s.opts.Scheme,
		controller: c.desc.GetName(),
		namespace:  req.Namespace,
		owns:       c.desc.GetOwns(),
		observed:   observed,
	}
	return context.WithValue(ctx, reconcileStateKey{}, st), st
}

func stateFrom(ctx context.Context) *reconcileState {
	st, _ := ctx.Value(reconcileStateKey{}).(*reconcileState)
	return st
}

// respond adds the desired children to a reconcile's response. A failed
// reconcile's children are never complete, so the host prunes nothing after
// an error.
func (st *reconcileState) respond(resp *polyopv1alpha1.ReconcileResponse, err error) (*polyopv1alpha1.ReconcileResponse, error) {
	if err != nil || resp == nil {
		return resp, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, d := range st.desired {
		resp.DesiredChildren = append(resp.DesiredChildren, d.data)
	}
	resp.ChildrenComplete = st.complete && resp.GetError() == nil
	if st.leaveStatus {
		resp.Status = nil
	}
	return resp, nil
}

// owned returns the declaration of the owned kind gvk, or nil.
func (st *reconcileState) owned(gvk schema.GroupVersionKind) *polyopv1alpha1.OwnedKind {
	for _, o := range st.owns {
		k := o.GetKind()
		if k.GetGroup() == gvk.Group && k.GetVersion() == gvk.Version && k.GetKind() == gvk.Kind {
			return o
		}
	}
	return nil
}

// Desire declares objs as desired children of the object being reconciled:
// when Reconcile returns, the host applies each with server-side apply under
// the controller's own field manager and makes the reconciled object its
// controller owner. Declare only the fields the controller manages, as in any
// server-side apply; the status and the metadata the API server sets
// (resourceVersion, uid, creationTimestamp, generation, managedFields) are
// dropped. The namespace defaults to the reconciled object's.
//
// Each object must be of a kind the controller Owns and have a name. A child
// declared twice (same kind, namespace and name) keeps the last declaration.
// The objects are encoded when Desire is called; later changes to them are
// not sent.
//
// Desire fails outside a reconcile, for an object of a kind the controller
// does not own, and for an object in another namespace than the reconciled
// object's.
func Desire(ctx context.Context, objs ...client.Object) error {
	st := stateFrom(ctx)
	if st == nil {
		return errors.New("sidecar: Desire was called outside a reconcile")
	}
	children := make([]desiredChild, 0, len(objs))
	for _, obj := range objs {
		child, err := st.desiredChild(obj)
		if err != nil {
			return fmt.Errorf("sidecar: desiring %T %s: %w", obj, nameOf(obj), err)
		}
		children = append(children, child)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, child := range children {
		replaced := false
		for i, d := range st.desired {
			if d.gvk == child.gvk && d.namespace == child.namespace && d.name == child.name {
				st.desired[i], replaced = child, true
				break
			}
		}
		if !replaced {
			st.desired = append(st.desired, child)
		}
	}
	return nil
}

func nameOf(obj client.Object) string {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return "<nil>"
	}
	return obj.GetName()
}

// DesiredComplete says that the children declared with Desire in this
// reconcile are all the children the object should have: the host deletes
// the children of the owned kinds that point at the object as their
// controller and were not declared. Without it, the host deletes nothing. It
// has no effect when the reconcile fails, so a failed reconcile never prunes,
// nor outside a reconcile.
func DesiredComplete(ctx context.Context) {
	if st := stateFrom(ctx); st != nil {
		st.mu.Lock()
		st.complete = true
		st.mu.Unlock()
	}
}

// serverSetMetadata are the metadata fields the API server sets; a desired
// child does not carry them.
var serverSetMetadata = []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}

func (st *reconcileState) desiredChild(obj client.Object) (desiredChild, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return desiredChild{}, errors.New("the object is nil")
	}
	gvk, err := prototypeKind(obj, st.scheme)
	if err != nil {
		return desiredChild{}, err
	}
	if st.owned(gvk) == nil {
		return desiredChild{}, fmt.Errorf("controller %q does not own %s: declare Owns(&%s{}) when building it", st.controller, gvk, gvk.Kind)
	}
	if obj.GetName() == "" {
		return desiredChild{}, errors.New("the object has no name")
	}
	if ns := obj.GetNamespace(); ns != "" && st.namespace != "" && ns != st.namespace {
		return desiredChild{}, fmt.Errorf("the object is in namespace %q, but its owner is in %q: owner references cannot cross namespaces", ns, st.namespace)
	}

	kind := obj.GetObjectKind()
	previous := kind.GroupVersionKind()
	kind.SetGroupVersionKind(gvk)
	encoded, err := json.Marshal(obj)
	kind.SetGroupVersionKind(previous)
	if err != nil {
		return desiredChild{}, fmt.Errorf("encoding: %w", err)
	}
	data, err := without(encoded, []string{"status"}, func(metadata []byte) ([]byte, error) {
		return without(metadata, serverSetMetadata, nil)
	})
	if err != nil {
		return desiredChild{}, fmt.Errorf("encoding: %w", err)
	}
	return desiredChild{gvk: gvk, namespace: obj.GetNamespace(), name: obj.GetName(), data: data}, nil
}

// without returns the JSON object data without the members named in drop,
// and with its metadata member passed through metadata (when not nil). The
// other members are copied as they are: their values are not decoded.
func without(data []byte, drop []string, metadata func([]byte) ([]byte, error)) ([]byte, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return nil, err
	}
	for _, key := range drop {
		delete(members, key)
	}
	if m, ok := members["metadata"]; ok && metadata != nil {
		stripped, err := metadata(m)
		if err != nil {
			return nil, err
		}
		members["metadata"] = stripped
	}
	return json.Marshal(members)
}

// ObservedChildren returns the children of type T the host sent with the
// reconcile in progress: the objects of an owned kind declared with
// SendObserved whose controller owner reference points at the reconciled
// object, as the host's cache holds them. T is a typed object in the scheme,
// or *unstructured.Unstructured for every observed child, whatever its kind.
//
// It fails outside a reconcile, and for a kind the controller does not own
// with SendObserved.
func ObservedChildren[T client.Object](ctx context.Context) ([]T, error) {
	st := stateFrom(ctx)
	if st == nil {
		return nil, errors.New("sidecar: ObservedChildren was called outside a reconcile")
	}
	typ := reflect.TypeFor[T]()
	if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("sidecar: ObservedChildren: the type must be a pointer to a struct, such as *appsv1.Deployment; got %s", typ)
	}
	newT := func() T { return reflect.New(typ.Elem()).Interface().(T) }
	_, all := any(newT()).(*unstructured.Unstructured)
	var gvk schema.GroupVersionKind
	if !all {
		var err error
		if gvk, err = apiutil.GVKForObject(newT(), st.scheme); err != nil {
			return nil, fmt.Errorf("sidecar: ObservedChildren: finding the kind of %s: %w", typ, err)
		}
		if o := st.owned(gvk); o == nil || !o.GetSendObserved() {
			return nil, fmt.Errorf("sidecar: controller %q is not sent the observed %s children: declare Owns(&%s{}, sidecar.SendObserved())", st.controller, gvk.Kind, gvk.Kind)
		}
	}
	var out []T
	for _, data := range st.observed {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(data, &head); err != nil {
			return nil, fmt.Errorf("sidecar: decoding an observed child: %w", err)
		}
		if !all && schema.FromAPIVersionAndKind(head.APIVersion, head.Kind) != gvk {
			continue
		}
		obj := newT()
		if err := decodeObject(data, obj); err != nil {
			return nil, fmt.Errorf("sidecar: decoding an observed %s: %w", head.Kind, err)
		}
		if k := obj.GetObjectKind(); k.GroupVersionKind().Empty() {
			k.SetGroupVersionKind(gvk)
		}
		out = append(out, obj)
	}
	return out, nil
}

// decodeObject decodes the API server's JSON into obj, case-sensitively as
// the API server does.
func decodeObject(data []byte, obj client.Object) error {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.UnmarshalJSON(data)
	}
	return sigsjson.UnmarshalCaseSensitivePreserveInts(data, obj)
}
