package controller

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/description"
)

// desiredChild is one validated desired child, ready to apply.
type desiredChild struct {
	id   childID
	kind ChildKind
	obj  *unstructured.Unstructured
	// hash identifies the applied configuration, to tell whether it changed
	// since the last apply.
	hash configHash
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
	if len(raws) == 0 {
		return nil, nil
	}
	byGVK := map[schema.GroupVersionKind]ChildKind{}
	var owned []string
	for _, k := range kinds {
		byGVK[k.GVK] = k
		owned = append(owned, description.GVKString(k.GVK))
	}
	ownedList := strings.Join(owned, ", ")
	if ownedList == "" {
		ownedList = "no kinds"
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
	for i, raw := range raws {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("desired_children[%d]: %s", i, fmt.Sprintf(format, args...)))
		}
		var content any
		if err := utiljson.Unmarshal(raw, &content); err != nil {
			bad("not valid JSON: %v (%q)", err, truncate(raw))
			continue
		}
		m, ok := content.(map[string]any)
		if !ok {
			bad("not a JSON object: %q", truncate(raw))
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
		if err != nil || u.GetAPIVersion() == "" || u.GetKind() == "" {
			bad("apiVersion and kind are required, got apiVersion %q and kind %q", u.GetAPIVersion(), u.GetKind())
			continue
		}
		gvk := gv.WithKind(u.GetKind())
		name := u.GetName()
		label := fmt.Sprintf("%s %q", gvk.Kind, name)
		kind, ok := byGVK[gvk]
		if !ok {
			bad("%s: %s is not a kind the controller owns (it owns %s)", label, description.GVKString(gvk), ownedList)
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
		delete(u.Object, "status")
		var refs []metav1.OwnerReference
		for _, r := range u.GetOwnerReferences() {
			if r.UID != owner.GetUID() {
				refs = append(refs, r)
			}
		}
		u.SetOwnerReferences(append(refs, ref))
		labels, _, err := unstructured.NestedStringMap(u.Object, "metadata", "labels")
		if err != nil {
			bad("%s: metadata.labels: %v", label, err)
			continue
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[ControllerLabel] = controller
		u.SetLabels(labels)
		hash, err := hashChild(u)
		if err != nil {
			bad("%s cannot be encoded: %v", label, err)
			continue
		}
		out = append(out, desiredChild{id: id, kind: kind, obj: u, hash: hash})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("the sidecar returned invalid desired children, so none was applied: %w", err)
	}
	return out, nil
}

// hashChild identifies the configuration to apply, u as validateChildren
// made it (server-set metadata and status dropped, the owner reference and
// the label set):
// its canonical JSON's hash, so that a sidecar that sends a child with other
// bytes (another key order, a new resourceVersion) but the same configuration
// causes no apply.
func hashChild(u *unstructured.Unstructured) (configHash, error) {
	canonical, err := json.Marshal(u.Object)
	if err != nil {
		return configHash{}, err
	}
	return sha256.Sum256(canonical), nil
}
