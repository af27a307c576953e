package sidecar

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// OwnerUIDIndex is the index the host keeps on every kind a controller owns:
// the UID of an object's controller owner. List a controller's children in
// its namespace with client.MatchingFields{sidecar.OwnerUIDIndex: string(owner.UID)}.
const OwnerUIDIndex = ".metadata.controllerUID"

// IndexValue says how the host computes the values of an index: FieldPath or
// CEL.
type IndexValue interface {
	setOn(*polyopv1alpha1.IndexDescription)
}

type fieldPath string

func (p fieldPath) setOn(d *polyopv1alpha1.IndexDescription) {
	d.Value = &polyopv1alpha1.IndexDescription_FieldPath{FieldPath: string(p)}
}

type celExpression string

func (e celExpression) setOn(d *polyopv1alpha1.IndexDescription) {
	d.Value = &polyopv1alpha1.IndexDescription_Cel{Cel: string(e)}
}

// FieldPath indexes an object under the values at path: dot-separated field
// names (".spec.nodeName"), a quoted name (".metadata.labels['app.kubernetes.io/name']"),
// and after a list [*], [N] or [?(@.field==literal)], as in
// ".metadata.ownerReferences[?(@.controller==true)].name". The host parses it
// at start and stops if it does not parse (the syntax is in docs/protocol.md,
// "Indexes").
func FieldPath(path string) IndexValue { return fieldPath(path) }

// CEL indexes an object under the string, or each string of the list, that
// the CEL expression expr returns for it, with the object as the variable
// "object", for example
// "object.metadata.ownerReferences.filter(r, has(r.controller) && r.controller).map(r, r.name)".
// The host compiles it at start and stops, naming the index, if it does not
// compile.
func CEL(expr string) IndexValue { return celExpression(expr) }

// Index declares a cache index the host keeps on obj's kind, the declarative
// form of controller-runtime's FieldIndexer.IndexField: the host computes the
// values itself, and a List of the kind through GetClient with
// client.MatchingFields{name: value} is answered from the host's cache. The
// kind is cached (see CacheKind) in every namespace the host watches.
//
//	srv.Index(&batchv1.Job{}, ".metadata.controller",
//		sidecar.FieldPath(".metadata.ownerReferences[?(@.controller==true)].name"))
//
// Declare indexes before serving: the host reads them once, at start.
func (s *Server) Index(obj client.Object, name string, value IndexValue) error {
	gvk, err := apiutil.GVKForObject(obj, s.Scheme())
	if err != nil {
		return fmt.Errorf("index %q: %w", name, err)
	}
	if name == "" {
		return fmt.Errorf("index on %s: a name is required", gvk.Kind)
	}
	if name == OwnerUIDIndex {
		return fmt.Errorf("index %q on %s: the host keeps this index itself on every owned kind; choose another name", name, gvk.Kind)
	}
	if value == nil {
		return fmt.Errorf("index %q on %s: say how its values are computed, with sidecar.FieldPath or sidecar.CEL", name, gvk.Kind)
	}
	d := &polyopv1alpha1.IndexDescription{Kind: &polyopv1alpha1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}, Name: name}
	value.setOn(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving {
		return fmt.Errorf("index %q on %s: indexes must be declared before the server serves: the host reads them once, at start", name, gvk.Kind)
	}
	if slices.ContainsFunc(s.indexes, func(o *polyopv1alpha1.IndexDescription) bool {
		return o.GetName() == name && o.GetKind().GetKind() == gvk.Kind && o.GetKind().GetGroup() == gvk.Group
	}) {
		return fmt.Errorf("index %q on %s is already declared", name, gvk.Kind)
	}
	s.indexes = append(s.indexes, d)
	return nil
}

// CacheOptions select what the host caches of a kind declared with
// CacheKind.
type CacheOptions struct {
	// Namespaces are the namespaces cached. Defaults to none: every
	// namespace the host watches (its --namespace), or every namespace.
	Namespaces []string
	// Labels selects the objects cached. Defaults to nil: every object.
	Labels labels.Selector
	// Fields selects the objects cached, with the API server's own field
	// selectors. Defaults to nil: every object.
	Fields fields.Selector
}

// CacheKind declares obj's kind for cached reads: the host starts an informer
// for it at start, and reads through GetClient come from its cache, with no
// controller and no event mapping. A read outside the namespaces cached fails
// unless it asks for the API server (client.Uncached). A kind a controller
// reconciles, owns or watches is cached anyway; declaring it may then take no
// selectors.
//
// Declare cached kinds before serving: the host reads them once, at start.
func (s *Server) CacheKind(obj client.Object, opts CacheOptions) error {
	gvk, err := apiutil.GVKForObject(obj, s.Scheme())
	if err != nil {
		return fmt.Errorf("cached kind: %w", err)
	}
	d := &polyopv1alpha1.CachedKind{Kind: &polyopv1alpha1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}, Namespaces: slices.Clone(opts.Namespaces)}
	if opts.Labels != nil && !opts.Labels.Empty() {
		d.LabelSelector = opts.Labels.String()
	}
	if opts.Fields != nil && !opts.Fields.Empty() {
		d.FieldSelector = opts.Fields.String()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving {
		return errors.New("cached kind " + gvk.Kind + ": cached kinds must be declared before the server serves: the host reads them once, at start")
	}
	for _, o := range s.cachedKinds {
		if o.GetKind().GetKind() == gvk.Kind && o.GetKind().GetGroup() == gvk.Group {
			return fmt.Errorf("cached kind %s is already declared", gvk.Kind)
		}
	}
	s.cachedKinds = append(s.cachedKinds, d)
	return nil
}
