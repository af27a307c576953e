package description

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The verbs each use of a kind grants, as RBAC names them.
var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "update", "patch", "delete"}
	// The host patches status; update and get are what kubebuilder grants on
	// a status subresource, for a sidecar that writes status imperatively.
	statusVerbs = []string{"get", "update", "patch"}
)

// eventKind is the kind the host records events as.
var eventKind = Kind{GVK: schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "Event"}, Resource: "events", Namespaced: true}

// Grant is one access a description grants: verbs on a kind's objects, or on
// one of their subresources, in some namespaces, and the declaration that
// grants it.
type Grant struct {
	// Kind is the kind granted.
	Kind Kind
	// Subresource is the subresource granted, such as "status"; "" for the
	// objects themselves.
	Subresource string
	// Verbs are the verbs granted, as RBAC names them.
	Verbs []string
	// Namespaces are the namespaces granted; nil for every namespace, and
	// always for a cluster-scoped kind.
	Namespaces []string
	// Reason names the declaration that grants it, for messages: for example
	// `controller "widgets" owns it`.
	Reason string
}

// Grants is what a description grants the host, and through the host's
// Cluster service the sidecar. It is the one definition of both: the host's
// RBAC (manifests.RBAC) renders every grant as a rule, and the Cluster service
// writes only the kinds some grant names, and reads Secrets only where one
// grants reading them.
type Grants struct {
	list []Grant
}

// Grants lists what r grants, for each controller (in the namespaces it
// watches, every namespace for a cluster-scoped kind): get, list and watch on
// the kinds it reconciles, owns and watches (the host caches them); get,
// update and patch on the reconciled kind's status (the host writes the
// status the sidecar returns); update and patch on the reconciled kind when it
// declares a finalizer (the host adds and removes it); update on its
// finalizers subresource when it owns kinds (the API server may require it to
// set blockOwnerDeletion on a child's owner reference); create, update, patch
// and delete on every owned kind (the host applies and prunes children);
// create and patch on events.k8s.io events (the host records events). And get,
// list and watch on the kinds the sidecar declares for cached reads
// (cached_kinds) or indexes, where the host caches them.
func (r *Resolved) Grants() *Grants {
	g := &Grants{}
	for _, c := range r.Controllers {
		add := func(k Kind, subresource, reason string, verbs ...string) {
			var namespaces []string
			if k.Namespaced {
				namespaces = slices.Clone(c.Namespaces)
			}
			g.list = append(g.list, Grant{Kind: k, Subresource: subresource, Verbs: verbs, Namespaces: namespaces, Reason: fmt.Sprintf("controller %q %s", c.Name, reason)})
		}
		reconciled := r.Kinds[c.GVK]
		add(reconciled, "", "reconciles it", readVerbs...)
		add(reconciled, "status", "reconciles it", statusVerbs...)
		if c.Finalizer != "" {
			add(reconciled, "", "reconciles it with a finalizer", "update", "patch")
		}
		if len(c.Owns) > 0 {
			add(reconciled, "finalizers", "reconciles it and owns children", "update")
		}
		for _, o := range c.Owns {
			add(r.Kinds[o.GVK], "", "owns it", append(slices.Clone(readVerbs), writeVerbs...)...)
		}
		for _, w := range c.Watches {
			add(r.Kinds[w.GVK], "", "watches it", readVerbs...)
		}
		add(eventKind, "", "records events", "create", "patch")
	}
	for _, gvk := range slices.SortedFunc(maps.Keys(r.Declared), func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) }) {
		k := r.Kinds[gvk]
		var namespaces []string
		if k.Namespaced {
			namespaces = slices.Clone(r.Views[gvk].Namespaces)
		}
		g.list = append(g.list, Grant{Kind: k, Verbs: slices.Clone(readVerbs), Namespaces: namespaces, Reason: "the sidecar declares it for cached reads or an index"})
	}
	return g
}

// All is every grant, in the order of the description.
func (g *Grants) All() []Grant { return slices.Clone(g.list) }

// Names reports whether some grant names the resource gr, whatever its
// verbs, subresource or namespaces.
func (g *Grants) Names(gr schema.GroupResource) bool {
	return slices.ContainsFunc(g.list, func(x Grant) bool { return x.Kind.groupResource() == gr })
}

// Allows reports whether some grant allows verb on the resource gr (or its
// subresource, when not "") in namespace; "" asks for every namespace, or a
// cluster-scoped kind.
func (g *Grants) Allows(gr schema.GroupResource, subresource, verb, namespace string) bool {
	return slices.ContainsFunc(g.list, func(x Grant) bool {
		return x.Kind.groupResource() == gr && x.Subresource == subresource && slices.Contains(x.Verbs, verb) &&
			(len(x.Namespaces) == 0 || namespace != "" && slices.Contains(x.Namespaces, namespace))
	})
}

// Namespaces lists the namespaces that grants limited to namespaces allow
// verb on the resource gr's objects in, sorted, for a message that says where
// a verb Allows refused is granted.
func (g *Grants) Namespaces(gr schema.GroupResource, verb string) []string {
	var out []string
	for _, x := range g.list {
		if x.Kind.groupResource() != gr || x.Subresource != "" || !slices.Contains(x.Verbs, verb) {
			continue
		}
		for _, ns := range x.Namespaces {
			if !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (k Kind) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: k.GVK.Group, Resource: k.Resource}
}
