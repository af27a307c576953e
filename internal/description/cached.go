package description

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/polyop/polyop/internal/index"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Index is one validated IndexDescription, its expression compiled.
type Index struct {
	// GVK is the indexed kind.
	GVK schema.GroupVersionKind
	// Name is the field name Lists select by.
	Name string
	// Source is the field path or CEL expression, as declared, for logs.
	Source string
	// Expression computes an object's values.
	Expression index.Expression
}

// CachedKind is one validated CachedKind.
type CachedKind struct {
	// GVK is the cached kind.
	GVK schema.GroupVersionKind
	// Namespaces are the namespaces cached; empty for every namespace.
	Namespaces []string
	// Labels and Fields select the objects cached; nil for every object.
	Labels labels.Selector
	Fields fields.Selector
}

// indexes validates the declared indexes and compiles their expressions.
func indexes(in []*polyopv1alpha1.IndexDescription, bad reporter) []Index {
	var out []Index
	seen := map[schema.GroupVersionKind]map[string]bool{}
	for i, d := range in {
		p := fmt.Sprintf("indexes[%d]", i)
		ix := Index{GVK: gvkOf(p+".kind", d.GetKind(), bad), Name: d.GetName()}
		switch {
		case ix.Name == "":
			bad(p+".name", "required")
		case strings.ContainsAny(ix.Name, "=!, \t\n"):
			bad(p+".name", "index %q on %s: a name may not hold '=', '!', ',' or spaces, which end a field selector's key", ix.Name, GVKString(ix.GVK))
		case ix.Name == index.OwnerUID:
			bad(p+".name", "index %q on %s: the host keeps this index itself on every owned kind; choose another name", ix.Name, GVKString(ix.GVK))
		case seen[ix.GVK][ix.Name]:
			bad(p+".name", "index %q on %s is declared twice", ix.Name, GVKString(ix.GVK))
		}
		if seen[ix.GVK] == nil {
			seen[ix.GVK] = map[string]bool{}
		}
		seen[ix.GVK][ix.Name] = true
		var err error
		switch v := d.GetValue().(type) {
		case *polyopv1alpha1.IndexDescription_FieldPath:
			ix.Source = "field path " + v.FieldPath
			if ix.Expression, err = index.FieldPath(v.FieldPath); err != nil {
				bad(p+".field_path", "index %q on %s: %v", ix.Name, GVKString(ix.GVK), err)
			}
		case *polyopv1alpha1.IndexDescription_Cel:
			ix.Source = "CEL " + v.Cel
			if ix.Expression, err = index.CEL(v.Cel, 0); err != nil {
				bad(p+".cel", "index %q on %s: the CEL expression %q does not compile: %v", ix.Name, GVKString(ix.GVK), v.Cel, err)
			}
		default:
			bad(p, "index %q on %s: set field_path or cel", ix.Name, GVKString(ix.GVK))
		}
		out = append(out, ix)
	}
	return out
}

// cachedKinds validates the kinds declared for cached reads.
func cachedKinds(in []*polyopv1alpha1.CachedKind, bad reporter) []CachedKind {
	var out []CachedKind
	seen := map[schema.GroupVersionKind]bool{}
	for i, d := range in {
		p := fmt.Sprintf("cached_kinds[%d]", i)
		ck := CachedKind{GVK: gvkOf(p+".kind", d.GetKind(), bad), Namespaces: slices.Clone(d.GetNamespaces())}
		if seen[ck.GVK] {
			bad(p+".kind", "%s is declared twice", GVKString(ck.GVK))
		}
		seen[ck.GVK] = true
		for j, ns := range ck.Namespaces {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				bad(fmt.Sprintf("%s.namespaces[%d]", p, j), "%q is not a valid namespace: %v", ns, msgs)
			}
		}
		if s := d.GetLabelSelector(); s != "" {
			sel, err := labels.Parse(s)
			if err != nil {
				bad(p+".label_selector", "%v", err)
			}
			ck.Labels = sel
		}
		if s := d.GetFieldSelector(); s != "" {
			sel, err := fields.ParseSelector(s)
			if err != nil {
				bad(p+".field_selector", "%v", err)
			}
			ck.Fields = sel
		}
		out = append(out, ck)
	}
	return out
}

// cacheDeclared adds to views the kinds the sidecar declares for cached
// reads and the kinds of its indexes, and records them in r.Declared. A
// declared kind's namespaces are narrowed by the host's; one that a
// controller already caches keeps that view, which must hold every namespace
// the declaration asks for.
func (r *Resolved) cacheDeclared(views map[schema.GroupVersionKind]CacheView) error {
	r.Declared = map[schema.GroupVersionKind]bool{}
	var errs []string
	for _, ck := range r.CachedKinds {
		r.Declared[ck.GVK] = true
		namespaced := r.Kinds[ck.GVK].Namespaced
		if !namespaced && len(ck.Namespaces) > 0 {
			errs = append(errs, fmt.Sprintf("cached kind %s declares namespaces, but it is cluster-scoped", GVKString(ck.GVK)))
			continue
		}
		ns := ck.Namespaces
		if namespaced && len(r.hostNamespaces) > 0 {
			if len(ns) == 0 {
				ns = slices.Clone(r.hostNamespaces)
			} else {
				ns = slices.DeleteFunc(slices.Clone(ns), func(n string) bool { return !slices.Contains(r.hostNamespaces, n) })
				if len(ns) == 0 {
					errs = append(errs, fmt.Sprintf("cached kind %s declares namespaces %s, none of which the host watches (--namespace %s)",
						GVKString(ck.GVK), strings.Join(ck.Namespaces, ", "), strings.Join(r.hostNamespaces, ",")))
					continue
				}
			}
		}
		slices.Sort(ns)
		view, cached := views[ck.GVK]
		if !cached {
			views[ck.GVK] = CacheView{Namespaces: ns, Labels: ck.Labels, Fields: ck.Fields}
			continue
		}
		if ck.Labels != nil || ck.Fields != nil {
			errs = append(errs, fmt.Sprintf("cached kind %s declares selectors, but a controller reconciles, owns or watches it, so the host caches it for that controller: drop the selectors",
				GVKString(ck.GVK)))
			continue
		}
		if len(view.Namespaces) > 0 && (len(ns) == 0 || slices.ContainsFunc(ns, func(n string) bool { return !slices.Contains(view.Namespaces, n) })) {
			errs = append(errs, fmt.Sprintf("cached kind %s asks for namespaces %s, but a controller reconciles, owns or watches it, so the host caches it in %s only: declare those namespaces, or none of the kind",
				GVKString(ck.GVK), orEvery(ns), strings.Join(view.Namespaces, ", ")))
		}
	}
	for _, ix := range r.Indexes {
		r.Declared[ix.GVK] = true
		if _, cached := views[ix.GVK]; cached {
			continue
		}
		var v CacheView
		if r.Kinds[ix.GVK].Namespaced {
			v.Namespaces = slices.Clone(r.hostNamespaces)
		}
		views[ix.GVK] = v
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid sidecar description: %s", strings.Join(errs, "; "))
	}
	return nil
}

// orEvery lists namespaces, or says every namespace.
func orEvery(ns []string) string {
	if len(ns) == 0 {
		return "every namespace"
	}
	return strings.Join(ns, ", ")
}
