package controller

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/rawjson"
)

// desiredChild is one validated desired child, ready to apply.
type desiredChild struct {
	id   childID
	kind ChildKind
	// apiVersion is the child's apiVersion, as the sidecar wrote it.
	apiVersion string
	// raw is the configuration to apply: the sidecar's JSON object, each
	// member once, without status, with the metadata validateChildren set
	// (see configuration). It is applied as it is, never decoded but for
	// the rare comparison with a child someone else changed (object).
	raw []byte
	// hash identifies the applied configuration, to tell whether it changed
	// since the last apply.
	hash configHash
	// metadataAt is the offset in raw of the metadata object's opening
	// brace, where a precondition's resourceVersion goes.
	metadataAt int
}

// object decodes the child's configuration, as the API machinery decodes
// unstructured content.
func (c desiredChild) object() (*unstructured.Unstructured, error) {
	var content map[string]any
	if err := utiljson.Unmarshal(c.raw, &content); err != nil {
		return nil, fmt.Errorf("decoding child %s: %w", c.id, err)
	}
	return &unstructured.Unstructured{Object: content}, nil
}

// configHash is the SHA-256 of a child's applied configuration, kept as an
// array rather than hex: the host remembers one per child.
type configHash [sha256.Size]byte

// serverSetMetadata are the metadata fields the API server sets. A sidecar
// that returns an observed child it edited carries them; they are dropped
// before the apply (server-side apply refuses managedFields, and a
// resourceVersion would make the apply conditional).
var serverSetMetadata = []string{
	"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation",
	"deletionTimestamp", "deletionGracePeriodSeconds", "selfLink",
}

// validateChildren parses and checks every desired child before anything is
// written: each must be a JSON object of a kind the controller owns, with a
// name, in the owner's namespace (or none, for a cluster-scoped kind), named
// once, and without another controller owner. It returns the children ready
// to apply: namespace defaulted, server-set metadata and status dropped (a
// child's status is its own controller's to write), owner set as their
// controller owner and ControllerLabel set to controller, the controller's
// name.
func validateChildren(raws [][]byte, owner client.Object, controller string, kinds []ChildKind) ([]desiredChild, error) {
	return validateLabelledChildren(raws, owner, controller, kinds, nil)
}

// validateLabelledChildren is validateChildren that also sets extra, the
// labels the host adds to every child (its controller's shard label, when
// sharding is on), before each child is hashed: a child whose owner moved to
// another replica is applied again with its new label.
func validateLabelledChildren(raws [][]byte, owner client.Object, controller string, kinds []ChildKind, extra map[string]string) ([]desiredChild, error) {
	if len(raws) == 0 {
		return nil, nil
	}
	// The kinds owned, as a message names them.
	ownedList := func() string {
		owned := make([]string, 0, len(kinds))
		for _, k := range kinds {
			owned = append(owned, description.GVKString(k.GVK))
		}
		if len(owned) == 0 {
			return "no kinds"
		}
		return strings.Join(owned, ", ")
	}
	ownerAPIVersion, ownerKind := owner.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	ref := metav1.OwnerReference{
		APIVersion:         ownerAPIVersion,
		Kind:               ownerKind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}

	var errs []error
	out := make([]desiredChild, 0, len(raws))
	seen := map[childID]int{}
	// The members of the child at hand; a child has few.
	var membersBuf [8]childMember
	for i, raw := range raws {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("desired_children[%d]: %s", i, fmt.Sprintf(format, args...)))
		}
		if !json.Valid(raw) || !rawjson.NumbersFit(raw) {
			// The API machinery's decoder says what is wrong.
			var content any
			if err := utiljson.Unmarshal(raw, &content); err != nil {
				bad("not valid JSON: %v (%q)", err, truncate(raw))
				continue
			}
		}
		members, u, ok := readChild(membersBuf[:0], raw)
		if !ok {
			bad("not a JSON object: %q", truncate(raw))
			continue
		}
		gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
		if err != nil || u.GetAPIVersion() == "" || u.GetKind() == "" {
			bad("apiVersion and kind are required, got apiVersion %q and kind %q", u.GetAPIVersion(), u.GetKind())
			continue
		}
		gvk := gv.WithKind(u.GetKind())
		name := u.GetName()
		label := childLabel{gvk.Kind, name}
		kind, ok := ownedKind(kinds, gvk)
		if !ok {
			bad("%s: %s is not a kind the controller owns (it owns %s)", label, description.GVKString(gvk), ownedList())
			continue
		}
		if name == "" {
			bad("%s has no metadata.name (generateName cannot be applied)", gvk.Kind)
			continue
		}
		switch ns := u.GetNamespace(); {
		case !kind.Namespaced && ns != "":
			bad("%s: %s is cluster-scoped, but the child names namespace %q", label, gvk.Kind, ns)
			continue
		case kind.Namespaced && ns == "":
			u.SetNamespace(owner.GetNamespace())
		case kind.Namespaced && ns != owner.GetNamespace():
			bad("%s: a child lives in its owner's namespace %q, not %q", label, owner.GetNamespace(), ns)
			continue
		}
		if other := metav1.GetControllerOfNoCopy(u); other != nil && other.UID != owner.GetUID() {
			bad("%s already names %s %q as its controller", label, other.Kind, other.Name)
			continue
		}
		id := idOf(u)
		if j, dup := seen[id]; dup {
			bad("%s is also desired_children[%d]", id, j)
			continue
		}
		seen[id] = i

		meta, _ := u.Object["metadata"].(map[string]any)
		for _, f := range serverSetMetadata {
			delete(meta, f)
		}
		if _, set := meta["ownerReferences"]; !set && meta != nil {
			// What SetOwnerReferences below would set, without its
			// conversion through reflection: the usual case.
			meta["ownerReferences"] = []any{ownerReferenceContent(ref)}
		} else {
			var refs []metav1.OwnerReference
			for _, r := range u.GetOwnerReferences() {
				if r.UID != owner.GetUID() {
					refs = append(refs, r)
				}
			}
			u.SetOwnerReferences(append(refs, ref))
		}
		if err := setControllerLabel(u, controller, extra); err != nil {
			bad("%s: metadata.labels: %v", label, err)
			continue
		}
		config, metadata, err := configuration(members, u.Object["metadata"])
		if err != nil {
			bad("%s cannot be encoded: %v", label, err)
			continue
		}
		hash, err := hashConfiguration(members, metadata)
		if err != nil {
			bad("%s cannot be encoded: %v", label, err)
			continue
		}
		// metadata is sliced from config.
		metadataAt := cap(config) - cap(metadata)
		out = append(out, desiredChild{id: id, kind: kind, apiVersion: u.GetAPIVersion(), raw: config, hash: hash, metadataAt: metadataAt})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("the sidecar returned invalid desired children, so none was applied: %w", err)
	}
	return out, nil
}

// childMember is a top-level member of a desired child's JSON: its key,
// decoded, and its value's JSON.
type childMember struct {
	key, value []byte
}

// readChild reads a desired child, valid JSON: the members it keeps (the
// last of each key; not status, which is its own controller's to write),
// appended to members, and its apiVersion, kind and metadata decoded into
// u, as the API machinery decodes unstructured content, for the checks and
// the changes of its metadata. The rest of it is left as it is. ok is false
// when raw is not a JSON object.
func readChild(members []childMember, raw []byte) (_ []childMember, u *unstructured.Unstructured, ok bool) {
	err := rawjson.EachRaw(raw, func(key []byte, value json.RawMessage) error {
		for j := range members {
			if bytes.Equal(members[j].key, key) {
				// Of a key given twice, the last counts, as for a decoder.
				members = slices.Delete(members, j, j+1)
				break
			}
		}
		if string(key) != "status" {
			members = append(members, childMember{key: key, value: value})
		}
		return nil
	})
	if err != nil {
		return nil, nil, false
	}
	head := make(map[string]any, 3)
	for _, m := range members {
		switch k := string(m.key); k {
		case "apiVersion", "kind", "metadata":
			v, err := decodeValue(m.value)
			if err != nil {
				return nil, nil, false
			}
			head[k] = v
		}
	}
	return members, &unstructured.Unstructured{Object: head}, true
}

// decodeValue decodes a JSON value as the API machinery decodes
// unstructured content; a string without escapes costs one copy.
func decodeValue(raw []byte) (any, error) {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var v any
	err := utiljson.Unmarshal(raw, &v)
	return v, err
}

// configuration is the JSON object of a desired child's configuration: its
// members as readChild kept them, in their order, with metadata, as
// validateChildren set it, in place of the sidecar's (and written as
// json.Marshal writes it: metadataJSON, sliced from config).
func configuration(members []childMember, metadata any) (config, metadataJSON []byte, err error) {
	size := 2
	for _, m := range members {
		size += len(m.key) + len(m.value) + 4
	}
	out := make([]byte, 0, size+256)
	out = append(out, '{')
	start, end := 0, 0
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = rawjson.AppendStringBytes(out, m.key)
		out = append(out, ':')
		if string(m.key) != "metadata" {
			out = append(out, m.value...)
			continue
		}
		start = len(out)
		if out, err = appendJSON(out, metadata); err != nil {
			return nil, nil, err
		}
		end = len(out)
	}
	out = append(out, '}')
	return out, out[start:end], nil
}

// childLabel names a desired child in a message, as its kind and quoted
// name; formatted only when a message is.
type childLabel struct{ kind, name string }

func (l childLabel) String() string { return fmt.Sprintf("%s %q", l.kind, l.name) }

// ownedKind returns the kind of kinds whose GVK is gvk, if any. A controller
// owns few kinds: a walk costs less than a map.
func ownedKind(kinds []ChildKind, gvk schema.GroupVersionKind) (ChildKind, bool) {
	for _, k := range kinds {
		if k.GVK == gvk {
			return k, true
		}
	}
	return ChildKind{}, false
}

// ownerReferenceContent is ref as unstructured content, as
// runtime.DefaultUnstructuredConverter converts it (and so
// Unstructured.SetOwnerReferences sets it) for a reference whose Controller
// and BlockOwnerDeletion are set, as validateChildren's are.
func ownerReferenceContent(ref metav1.OwnerReference) map[string]any {
	return map[string]any{
		"apiVersion":         ref.APIVersion,
		"kind":               ref.Kind,
		"name":               ref.Name,
		"uid":                string(ref.UID),
		"controller":         *ref.Controller,
		"blockOwnerDeletion": *ref.BlockOwnerDeletion,
	}
}

// setControllerLabel sets ControllerLabel to controller, and extra, among u's labels,
// which must all be strings, as NestedStringMap and SetLabels would set it.
// The labels' map is set in place when u holds one of strings only (u is
// the Reconciler's own, decoded from the answer), rather than copied out and
// in again.
func setControllerLabel(u *unstructured.Unstructured, controller string, extra map[string]string) error {
	if labels, ok := u.Object["metadata"].(map[string]any)["labels"].(map[string]any); ok && stringsOnly(labels) {
		labels[ControllerLabel] = controller
		for k, v := range extra {
			labels[k] = v
		}
		return nil
	}
	labels, _, err := unstructured.NestedStringMap(u.Object, "metadata", "labels")
	if err != nil {
		return err
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ControllerLabel] = controller
	for k, v := range extra {
		labels[k] = v
	}
	u.SetLabels(labels)
	return nil
}

// stringsOnly reports whether every value of m is a string.
func stringsOnly(m map[string]any) bool {
	for _, v := range m {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return true
}

// hashConfiguration identifies a child's configuration, its members as
// readChild kept them with metadata (metadataJSON, as configuration wrote
// it): the hash of json.Marshal's encoding of its content as the API
// machinery decodes it (keys sorted; rawjson.AppendAsMarshalled for the
// members' values; metadataJSON is that already), so that a sidecar that
// sends a child with other bytes (another key order, a new resourceVersion)
// but the same configuration causes no apply. It is written into a pooled
// buffer, from the JSON, without decoding it: it runs for every desired
// child of every reconcile. It sorts members.
func hashConfiguration(members []childMember, metadataJSON []byte) (configHash, error) {
	buf := hashBuffers.Get().(*[]byte)
	defer hashBuffers.Put(buf)
	slices.SortFunc(members, func(a, b childMember) int { return bytes.Compare(a.key, b.key) })
	out := (*buf)[:0]
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = rawjson.AppendStringBytes(out, m.key)
		out = append(out, ':')
		if string(m.key) == "metadata" {
			out = append(out, metadataJSON...)
			continue
		}
		var err error
		if out, err = rawjson.AppendAsMarshalled(out, m.value); err != nil {
			return configHash{}, err
		}
	}
	out = append(out, '}')
	*buf = out[:0]
	return sha256.Sum256(out), nil
}

// hashBuffers are the buffers of hashConfiguration.
var hashBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appendJSON appends json.Marshal's encoding of v to out, for the values of
// unstructured content (maps of string keys, slices, strings, whole numbers
// as int64, other numbers as float64, booleans and nil) without reflection;
// other values go through json.Marshal.
func appendJSON(out []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(out, "null"...), nil
	case string:
		return rawjson.AppendString(out, v), nil
	case bool:
		return strconv.AppendBool(out, v), nil
	case int64:
		return strconv.AppendInt(out, v, 10), nil
	case map[string]any:
		if v == nil {
			return append(out, "null"...), nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out = append(out, '{')
		for i, k := range keys {
			if i > 0 {
				out = append(out, ',')
			}
			out = rawjson.AppendString(out, k)
			out = append(out, ':')
			var err error
			if out, err = appendJSON(out, v[k]); err != nil {
				return out, err
			}
		}
		return append(out, '}'), nil
	case []any:
		if v == nil {
			return append(out, "null"...), nil
		}
		out = append(out, '[')
		for i, e := range v {
			if i > 0 {
				out = append(out, ',')
			}
			var err error
			if out, err = appendJSON(out, e); err != nil {
				return out, err
			}
		}
		return append(out, ']'), nil
	}
	raw, err := json.Marshal(v)
	return append(out, raw...), err
}
