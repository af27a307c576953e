package sidecartest

import (
	"encoding/json"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	sigsjson "sigs.k8s.io/json"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// WithObservedChildren adds objs to the request as the host's observed
// children, as JSON with their apiVersion and kind from the Server's scheme.
// The host sends the children of the kinds a controller owns with
// sidecar.SendObserved whose controller owner reference points at the
// reconciled object; sidecar.ObservedChildren returns them.
func (h *Harness) WithObservedChildren(objs ...client.Object) RequestOption {
	h.t.Helper()
	children := make([][]byte, 0, len(objs))
	for _, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, h.srv.Scheme())
		if err != nil {
			h.t.Fatalf("sidecartest: finding the kind of %T: %v", obj, err)
		}
		obj = obj.DeepCopyObject().(client.Object)
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		data, err := json.Marshal(obj)
		if err != nil {
			h.t.Fatalf("sidecartest: encoding %T: %v", obj, err)
		}
		children = append(children, data)
	}
	return func(req *polyopv1alpha1.ReconcileRequest) {
		req.ObservedChildren = append(req.ObservedChildren, children...)
	}
}

// ChildrenComplete reports whether the desired children are the complete set,
// so that the host deletes the owned children not among them.
func (r *Response) ChildrenComplete() bool {
	return r.Raw.GetChildrenComplete()
}

// DesiredChildren returns the desired children the response carries, in
// order, as the host receives them.
func (r *Response) DesiredChildren() []*unstructured.Unstructured {
	r.t.Helper()
	out := make([]*unstructured.Unstructured, 0, len(r.Raw.GetDesiredChildren()))
	for _, data := range r.Raw.GetDesiredChildren() {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			r.t.Fatalf("sidecartest: decoding a desired child: %v", err)
		}
		out = append(out, u)
	}
	return out
}

// DesiredChild decodes into into the desired child of the given kind (for
// example "Deployment") and name, and fails the test when the response
// desires none. into is reset first.
func (r *Response) DesiredChild(kind, name string, into client.Object) {
	r.t.Helper()
	for _, data := range r.Raw.GetDesiredChildren() {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(data, &head); err != nil {
			r.t.Fatalf("sidecartest: decoding a desired child: %v", err)
		}
		if head.Kind != kind || head.Metadata.Name != name {
			continue
		}
		if v := reflect.ValueOf(into); v.Kind() == reflect.Pointer && !v.IsNil() {
			v.Elem().SetZero()
		}
		var err error
		if u, ok := into.(*unstructured.Unstructured); ok {
			err = u.UnmarshalJSON(data)
		} else {
			err = sigsjson.UnmarshalCaseSensitivePreserveInts(data, into)
		}
		if err != nil {
			r.t.Fatalf("sidecartest: decoding the desired %s %s into %T: %v", kind, name, into, err)
		}
		if k := into.GetObjectKind(); k.GroupVersionKind().Empty() {
			k.SetGroupVersionKind(schema.FromAPIVersionAndKind(head.APIVersion, head.Kind))
		}
		return
	}
	r.t.Fatalf("sidecartest: the response desires no %s named %q; it desires %s", kind, name, r.desiredNames())
}

func (r *Response) desiredNames() string {
	var names []string
	for _, u := range r.DesiredChildren() {
		names = append(names, u.GetKind()+" "+u.GetName())
	}
	if len(names) == 0 {
		return "nothing"
	}
	data, _ := json.Marshal(names)
	return string(data)
}
