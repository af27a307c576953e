package client

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// encode returns obj as JSON with its apiVersion and kind set to gvk. obj's
// own type meta is left as it was.
func encode(obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, error) {
	kind := obj.GetObjectKind()
	previous := kind.GroupVersionKind()
	kind.SetGroupVersionKind(gvk)
	data, err := json.Marshal(obj)
	kind.SetGroupVersionKind(previous)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", gvk.Kind, err)
	}
	return data, nil
}

// decodeInto replaces obj with the object data holds. Typed objects are reset
// first, so that nothing of what obj held survives; apiVersion and kind are
// set from the JSON, or to gvk when the JSON has none.
func decodeInto(data []byte, obj runtime.Object, gvk schema.GroupVersionKind) error {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		o.Object = nil
		if err := o.UnmarshalJSON(data); err != nil {
			return fmt.Errorf("decoding %s: %w", gvk.Kind, err)
		}
	case *unstructured.UnstructuredList:
		o.Object, o.Items = nil, nil
		if err := o.UnmarshalJSON(data); err != nil {
			return fmt.Errorf("decoding %s: %w", gvk.Kind, err)
		}
	default:
		v := reflect.ValueOf(obj)
		if v.Kind() != reflect.Pointer || v.IsNil() {
			return fmt.Errorf("decoding %s: %T is not a pointer to a struct", gvk.Kind, obj)
		}
		v.Elem().SetZero()
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, obj); err != nil {
			return fmt.Errorf("decoding %s into %T: %w", gvk.Kind, obj, err)
		}
	}
	if k := obj.GetObjectKind(); k.GroupVersionKind().Kind == "" {
		k.SetGroupVersionKind(gvk)
	}
	return nil
}

// listKind is the kind of the items of a list of kind gvk: a
// "DeploymentList" holds "Deployment"s. A kind without the suffix is taken
// as the item kind, as controller-runtime does for unstructured lists.
func listKind(gvk schema.GroupVersionKind) schema.GroupVersionKind {
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return gvk
}

// decodeList replaces list with the items of resp, as a list of the kind
// listGVK.
func decodeList(resp *polyopv1alpha1.ListResponse, list runtime.Object, listGVK schema.GroupVersionKind) error {
	items := make([]json.RawMessage, len(resp.GetItems()))
	for i, item := range resp.GetItems() {
		items[i] = item
	}
	apiVersion, kind := listGVK.ToAPIVersionAndKind()
	data, err := json.Marshal(struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ListMeta   `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}{
		APIVersion: apiVersion,
		Kind:       kind,
		Metadata:   metav1.ListMeta{ResourceVersion: resp.GetResourceVersion(), Continue: resp.GetContinueToken()},
		Items:      items,
	})
	if err != nil {
		return fmt.Errorf("encoding %s: %w", kind, err)
	}
	return decodeInto(data, list, listGVK)
}

// objectMeta is the part of an object's JSON that names it.
type objectMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
}

func (m objectMeta) gvk() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(m.APIVersion, m.Kind)
}

func gvkProto(gvk schema.GroupVersionKind) *polyopv1alpha1.GroupVersionKind {
	return &polyopv1alpha1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
}

func keyProto(namespace, name string) *polyopv1alpha1.ObjectKey {
	return &polyopv1alpha1.ObjectKey{Namespace: namespace, Name: name}
}

// describe names an object in errors: "apps/v1 Deployment default/web".
func describe(gvk schema.GroupVersionKind, namespace, name string) string {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	if namespace == "" {
		return fmt.Sprintf("%s %s %s", apiVersion, kind, name)
	}
	return fmt.Sprintf("%s %s %s/%s", apiVersion, kind, namespace, name)
}
