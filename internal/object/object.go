package object

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"

	"github.com/polyop/polyop/internal/rawjson"
)

// Object is one Kubernetes object of any kind: its kind and metadata decoded,
// the rest of it kept as JSON.
//
// The JSON is never modified once decoded: DeepCopy shares it, which keeps a
// copy out of the cache cheap. Everything that changes an object goes
// through metadata setters or a new decode.
type Object struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// body is the object's JSON object without apiVersion, kind and
	// metadata: "{}" or members such as "spec" and "status", in the order
	// received. Nil for an object that was never decoded.
	body []byte
}

var (
	_ client.Object    = &Object{}
	_ json.Marshaler   = &Object{}
	_ json.Unmarshaler = &Object{}
)

// New returns an empty Object of kind gvk, to read into.
func New(gvk schema.GroupVersionKind) *Object {
	o := &Object{}
	o.SetGroupVersionKind(gvk)
	return o
}

// UnmarshalJSON decodes a JSON object: apiVersion and kind into TypeMeta,
// metadata into ObjectMeta, and keeps a copy of the other members.
func (o *Object) UnmarshalJSON(data []byte) error {
	*o = Object{}
	// The body is gathered in a pooled buffer the size of the whole object
	// (metadata and its managedFields included), and only its own bytes
	// are kept: every watch event and every write's answer is decoded here.
	buf := bodyBuffers.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxPooledBody {
			bodyBuffers.Put(buf)
		}
	}()
	body := (*buf)[:0]
	body = append(body, '{')
	err := rawjson.Each(data, func(key string, value json.RawMessage) error {
		switch key {
		case "apiVersion":
			return sigsjson.UnmarshalCaseSensitivePreserveInts(value, &o.APIVersion)
		case "kind":
			return sigsjson.UnmarshalCaseSensitivePreserveInts(value, &o.Kind)
		case "metadata":
			return sigsjson.UnmarshalCaseSensitivePreserveInts(value, &o.ObjectMeta)
		}
		if len(body) > 1 {
			body = append(body, ',')
		}
		body = rawjson.AppendMember(body, key, value)
		return nil
	})
	if err != nil {
		return fmt.Errorf("decoding an object: %w", err)
	}
	body = append(body, '}')
	*buf = body[:0]
	o.body = bytes.Clone(body)
	return nil
}

// bodyBuffers are the buffers UnmarshalJSON gathers a body in.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledBody bounds the buffers kept in bodyBuffers: one grown by a
// rare large object is left to the garbage collector.
const maxPooledBody = 64 << 10

// MarshalJSON encodes the object: apiVersion and kind, metadata, then the
// other members as decoded.
func (o *Object) MarshalJSON() ([]byte, error) {
	meta, err := json.Marshal(&o.ObjectMeta)
	if err != nil {
		return nil, fmt.Errorf("encoding the metadata of %s: %w", o.describe(), err)
	}
	out := make([]byte, 0, len(meta)+len(o.body)+len(o.APIVersion)+len(o.Kind)+40)
	out = append(out, '{')
	if o.APIVersion != "" {
		out = rawjson.AppendMember(out, "apiVersion", rawjson.AppendString(nil, o.APIVersion))
		out = append(out, ',')
	}
	if o.Kind != "" {
		out = rawjson.AppendMember(out, "kind", rawjson.AppendString(nil, o.Kind))
		out = append(out, ',')
	}
	out = rawjson.AppendMember(out, "metadata", meta)
	if rest := bytes.TrimSpace(o.members()); len(rest) > 0 {
		out = append(out, ',')
		out = append(out, rest...)
	}
	return append(out, '}'), nil
}

// members is the body without its braces.
func (o *Object) members() []byte {
	if len(o.body) < 2 {
		return nil
	}
	return o.body[1 : len(o.body)-1]
}

// Field returns the JSON of the top-level member name (such as "spec" or
// "status"), and whether the object has it. apiVersion, kind and metadata
// are not fields: read them through the object's accessors. Of duplicate
// members, the last is the field, as for encoding/json and the API
// machinery's decoders (and so for Unstructured).
func (o *Object) Field(name string) (json.RawMessage, bool) {
	var found json.RawMessage
	_ = rawjson.Each(o.body, func(key string, value json.RawMessage) error {
		if key == name {
			found = value
		}
		return nil
	})
	return found, found != nil
}

// DecodeField decodes the top-level member name as the API machinery decodes
// unstructured content (whole numbers as int64), or returns nil when the
// object lacks it.
func (o *Object) DecodeField(name string) (any, error) {
	raw, ok := o.Field(name)
	if !ok {
		return nil, nil
	}
	var v any
	if err := utiljson.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decoding the %s of %s: %w", name, o.describe(), err)
	}
	return v, nil
}

// Unstructured decodes the whole object into an unstructured.Unstructured,
// for the few places that walk its content.
func (o *Object) Unstructured() (*unstructured.Unstructured, error) {
	raw, err := o.MarshalJSON()
	if err != nil {
		return nil, err
	}
	// Decoded as unstructured.Unstructured's UnmarshalJSON decodes, without
	// its check that the object names its kind: an Object need not (the
	// items of a built-in kind's list do not), and its error would quote the
	// whole object.
	var content map[string]any
	if err := utiljson.Unmarshal(raw, &content); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", o.describe(), err)
	}
	return &unstructured.Unstructured{Object: content}, nil
}

// describe names the object in an error.
func (o *Object) describe() string {
	if o.Namespace == "" {
		return fmt.Sprintf("%s %q", o.Kind, o.Name)
	}
	return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name)
}

// DeepCopyInto copies o into out. The body is shared: it is never modified.
func (o *Object) DeepCopyInto(out *Object) {
	out.TypeMeta = o.TypeMeta
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.body = o.body
}

// DeepCopy returns a copy of o that shares its body.
func (o *Object) DeepCopy() *Object {
	if o == nil {
		return nil
	}
	out := &Object{}
	o.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (o *Object) DeepCopyObject() runtime.Object {
	return o.DeepCopy()
}

// List is a list of Objects, as the API server returns one.
type List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Object `json:"items"`
}

var _ client.ObjectList = &List{}

// NewList returns an empty List of the objects of kind gvk, to list into.
func NewList(gvk schema.GroupVersionKind) *List {
	l := &List{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return l
}

// DeepCopyInto copies l into out.
func (l *List) DeepCopyInto(out *List) {
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Object, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (l *List) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &List{}
	l.DeepCopyInto(out)
	return out
}
