package controller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/object"
)

// OwnerIndex is the cache index every owned kind gets: the UID of an object's
// controller owner. Observed children and the children to prune are found
// through it, never by scanning.
const OwnerIndex = ".metadata.controllerUID"

// ownerIndexName is the name under which controller-runtime's cache looks up
// the index of a List with the field selector OwnerIndex=<uid>. It and
// allNamespaces follow controller-runtime's cache (pkg/cache/internal); the
// end-to-end tests of observed and pruned children fail if they drift.
const ownerIndexName = "field:" + OwnerIndex

// allNamespaces is the namespace part of the index key that controller-runtime's
// cache looks up for a List across all namespaces.
const allNamespaces = "__all_namespaces"

// ownerIndexFunc is OwnerIndex as the cache's informers keep it: under the
// name and with the keys ("<namespace>/<uid>") that cache.IndexField would
// use, so that a List with client.MatchingFields finds the children, but
// without the second, all-namespaces key IndexField gives every namespaced
// object: the host lists a namespaced owner's children in its namespace, and
// one key per child costs half the memory. The all-namespaces key is kept for
// children of cluster-scoped owners (kinds in clusterScoped), which are
// listed across namespaces.
func ownerIndexFunc(clusterScoped map[schema.GroupKind]bool) toolscache.IndexFunc {
	return func(raw any) ([]string, error) {
		obj, ok := raw.(client.Object)
		if !ok {
			return nil, nil
		}
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil {
			return nil, nil
		}
		ns := obj.GetNamespace()
		if ns == "" {
			return []string{allNamespaces + "/" + string(ref.UID)}, nil
		}
		keys := []string{ns + "/" + string(ref.UID)}
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && clusterScoped[gv.WithKind(ref.Kind).GroupKind()] {
			keys = append(keys, allNamespaces+"/"+string(ref.UID))
		}
		return keys, nil
	}
}

// ChildKind is a kind a controller owns, resolved.
type ChildKind struct {
	// GVK is the child kind.
	GVK schema.GroupVersionKind
	// Namespaced is true for a kind that lives in namespaces.
	Namespaced bool
	// SendObserved puts the observed children of this kind in every
	// ReconcileRequest.
	SendObserved bool
}

// childID names one child.
type childID struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

func (id childID) String() string {
	if id.namespace == "" {
		return fmt.Sprintf("%s %q", id.gvk.Kind, id.name)
	}
	return fmt.Sprintf("%s %s/%s", id.gvk.Kind, id.namespace, id.name)
}

func idOf(obj client.Object) childID {
	return childID{gvk: obj.GetObjectKind().GroupVersionKind(), namespace: obj.GetNamespace(), name: obj.GetName()}
}

// desiredChild is one validated desired child, ready to apply.
type desiredChild struct {
	id  childID
	obj *unstructured.Unstructured
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
// child's status is its own controller's to write), and owner set as their
// controller owner.
func validateChildren(raws [][]byte, owner client.Object, kinds []ChildKind) ([]desiredChild, error) {
	if len(raws) == 0 {
		return nil, nil
	}
	byGVK := map[schema.GroupVersionKind]ChildKind{}
	var owned []string
	for _, k := range kinds {
		byGVK[k.GVK] = k
		owned = append(owned, gvkString(k.GVK))
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
			bad("%s: %s is not a kind the controller owns (it owns %s)", label, gvkString(gvk), ownedList)
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
		hash, err := hashChild(u)
		if err != nil {
			bad("%s cannot be encoded: %v", label, err)
			continue
		}
		out = append(out, desiredChild{id: id, obj: u, hash: hash})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("the sidecar returned invalid desired children, so none was applied: %w", err)
	}
	return out, nil
}

// hashChild identifies the configuration to apply, u as validateChildren
// made it (server-set metadata and status dropped, the owner reference set):
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

// observedChildren lists, from the cache, the children of every owned kind
// whose controller owner is owner, sorted by kind and name.
//
// The children are the cache's own objects, not copies: they must not be
// modified.
func (r *Reconciler) observedChildren(ctx context.Context, owner client.Object) ([]*object.Object, error) {
	var out []*object.Object
	for _, k := range r.Children {
		list := object.NewList(k.GVK)
		opts := []client.ListOption{client.MatchingFields{OwnerIndex: string(owner.GetUID())}, client.UnsafeDisableDeepCopy}
		if k.Namespaced {
			opts = append(opts, client.InNamespace(owner.GetNamespace()))
		}
		if err := r.Client.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing the %s children of %s %s/%s from the cache: %w", k.GVK.Kind, owner.GetObjectKind().GroupVersionKind().Kind, owner.GetNamespace(), owner.GetName(), err)
		}
		for i := range list.Items {
			c := &list.Items[i]
			c.SetGroupVersionKind(k.GVK)
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := idOf(out[i]), idOf(out[j])
		if a.gvk != b.gvk {
			return a.gvk.String() < b.gvk.String()
		}
		if a.namespace != b.namespace {
			return a.namespace < b.namespace
		}
		return a.name < b.name
	})
	return out, nil
}

// childResult says what applyChildren did, for the log.
type childResult struct {
	applied, unchanged, pruned int
}

// applyChildren applies every desired child that changed, with server-side
// apply under the controller's field manager, forcing ownership of the fields
// it sets. A child whose applied configuration is the one last applied and
// whose observed state still holds every field of it is left alone: an
// unchanged child costs no request. When prune is set, and every apply
// succeeded, the observed children that are no longer desired are deleted
// (with their UID as a precondition, so that nothing recreated meanwhile is
// lost).
func (r *Reconciler) applyChildren(ctx context.Context, owner client.Object, desired []desiredChild, observed []*object.Object, prune bool) (childResult, error) {
	var res childResult
	observedByID := make(map[childID]*object.Object, len(observed))
	for _, o := range observed {
		observedByID[idOf(o)] = o
	}
	key := types.NamespacedName{Namespace: owner.GetNamespace(), Name: owner.GetName()}
	last := r.applied.children(key, owner.GetUID())
	now := make([]appliedChild, 0, len(desired))
	var errs []error
	for _, c := range desired {
		if prev, ok := findApplied(last, c.id); ok && prev.hash == c.hash && unchanged(observedByID[c.id], c.obj, prev.resourceVersion) {
			now = append(now, prev)
			res.unchanged++
			continue
		}
		out := c.obj.DeepCopy()
		err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(r.fieldManager()), client.ForceOwnership)
		if err != nil {
			errs = append(errs, fmt.Errorf("applying child %s: %w", c.id, err))
			continue
		}
		now = append(now, appliedChild{id: c.id, hash: c.hash, resourceVersion: out.GetResourceVersion()})
		res.applied++
	}
	r.applied.record(key, owner.GetUID(), now)
	if len(errs) > 0 || !prune {
		return res, errors.Join(errs...)
	}
	for _, o := range observed {
		id := idOf(o)
		if _, ok := findApplied(now, id); ok {
			continue
		}
		err := r.Client.Delete(ctx, o, client.Preconditions{UID: ptr.To(o.GetUID())}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting child %s, which is no longer desired: %w", id, err))
			continue
		}
		res.pruned++
	}
	return res, errors.Join(errs...)
}

// fieldManager is the field manager of the controller's children.
func (r *Reconciler) fieldManager() string {
	return "polyop/" + r.Controller.Name
}

// unchanged reports whether a child whose applied configuration is the one
// last applied, at resourceVersion applied, needs no apply: the cache holds
// the version that apply wrote, or an older one (the event of the apply is
// on its way and brings another reconcile), or the observed child, changed
// since, still holds every field the configuration sets.
func unchanged(observed *object.Object, desired *unstructured.Unstructured, applied string) bool {
	if observed == nil {
		return false
	}
	if cmp, err := resourceversion.CompareResourceVersion(observed.GetResourceVersion(), applied); err == nil && cmp <= 0 {
		return true
	}
	u, err := observed.Unstructured()
	if err != nil {
		return false
	}
	return holds(u, desired)
}

// holds reports whether observed still holds every field desired sets, owner
// references aside (they are compared by UID): if so, applying desired again
// would change nothing the controller manages. A list must match element by
// element: a list another manager added to is applied again, which is
// harmless.
func holds(observed, desired *unstructured.Unstructured) bool {
	for _, want := range desired.GetOwnerReferences() {
		found := false
		for _, got := range observed.GetOwnerReferences() {
			if got.UID == want.UID && ptr.Deref(got.Controller, false) == ptr.Deref(want.Controller, false) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	d := desired.DeepCopy()
	unstructured.RemoveNestedField(d.Object, "metadata", "ownerReferences")
	return contains(observed.Object, d.Object)
}

// contains reports whether have holds every field of want with the same
// value.
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, present := h[k]
			if !present {
				if empty(wv) {
					continue // the API server drops empty fields
				}
				return false
			}
			if !contains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return have == nil
	}
	if wf, ok := number(want); ok {
		hf, ok := number(have)
		return ok && hf == wf
	}
	return have == want
}

// empty reports whether v is null, or an empty object or list.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// number reads a JSON number decoded as int64 or float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}

// appliedState remembers, per owner, each child's last applied
// configuration (its hash) and the resourceVersion that apply returned, so
// that an unchanged child is not applied again. It is memory only: after a
// restart (or a change of leader) each child is applied once more, which
// changes nothing on the API server.
type appliedState struct {
	mu     sync.Mutex
	owners map[types.NamespacedName]appliedOwner
}

// appliedOwner is what is remembered of one owner. Its children are a slice,
// not a map: an owner has few children, and a small map costs several times
// the memory (the host keeps one appliedOwner per cached owner).
type appliedOwner struct {
	uid      types.UID
	children []appliedChild
}

type appliedChild struct {
	id              childID
	hash            configHash
	resourceVersion string
}

// findApplied returns the child id of children, if it is there.
func findApplied(children []appliedChild, id childID) (appliedChild, bool) {
	for _, c := range children {
		if c.id == id {
			return c, true
		}
	}
	return appliedChild{}, false
}

func newAppliedState() *appliedState {
	return &appliedState{owners: map[types.NamespacedName]appliedOwner{}}
}

// children returns what is remembered of the children of the owner key with
// uid (nothing for another object of the same name).
func (s *appliedState) children(key types.NamespacedName, uid types.UID) []appliedChild {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.owners[key]; ok && o.uid == uid {
		return o.children
	}
	return nil
}

// record replaces what is remembered of key's children.
func (s *appliedState) record(key types.NamespacedName, uid types.UID, children []appliedChild) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owners[key] = appliedOwner{uid: uid, children: children}
}

// forget drops what is remembered of key, once it no longer exists.
func (s *appliedState) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.owners, key)
}

func gvkString(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind + "." + gvk.Version
	}
	return gvk.Kind + "." + gvk.Group + "/" + gvk.Version
}
