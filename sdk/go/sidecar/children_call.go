package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	sigsjson "sigs.k8s.io/json"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

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
