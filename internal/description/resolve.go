package description

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is a kind the sidecar names, as the API server serves it.
type Kind struct {
	// GVK is the kind at the version the sidecar names it.
	GVK schema.GroupVersionKind
	// Resource is the kind's resource, for example "deployments".
	Resource string
	// Namespaced is true for a kind whose objects live in namespaces.
	Namespaced bool
}

// CacheView is what the host's cache holds of a kind.
type CacheView struct {
	// Namespaces are the namespaces cached; nil for every namespace (always
	// for a cluster-scoped kind).
	Namespaces []string
	// Labels selects the objects cached; nil for every object. Only a
	// reconciled kind, or a kind declared for cached reads, has one: the
	// kinds a controller owns or watches are cached whatever their labels.
	Labels labels.Selector
	// Fields selects the objects cached; nil for every object. Only a kind
	// declared for cached reads has one.
	Fields fields.Selector
}

// Service names the Service in front of the host's webhook server.
type Service struct {
	Name, Namespace string
}

// ResolveOptions are the host's limits and names that a resolution takes in.
type ResolveOptions struct {
	// Namespaces narrows the namespaces every controller of a namespaced kind
	// watches (the host's --namespace). Defaults to none: each controller
	// watches the namespaces it declares.
	Namespaces []string
	// LabelSelector narrows the objects every controller watches (the host's
	// --label-selector). Defaults to nil: as declared.
	LabelSelector labels.Selector
	// ServiceName and ServiceNamespace name the Service in front of the
	// webhook server. Default to "<sidecar name>-webhook" and
	// DefaultServiceNamespace().
	ServiceName, ServiceNamespace string
	// WebhooksOff leaves the kinds of the webhooks and conversions
	// unresolved, for a host that serves none (--webhook-port 0): they need
	// not be served then. Defaults to false.
	WebhooksOff bool
}

// Resolved is a description resolved against the API server: every kind it
// names with its resource and scope, the controllers narrowed by the host's
// limits, the cache's view of every kind, every webhook's resource and every
// conversion's CRD. It is built once, by Resolve, and read by everything that
// needs to know one of those facts.
type Resolved struct {
	// Description is the description narrowed by the host's limits; its
	// Webhooks carry their resource.
	*Description
	// Kinds are the kinds the sidecar names: reconciled, owned, watched, and
	// those of its webhooks.
	Kinds map[schema.GroupVersionKind]Kind
	// Views are the cache's view of every reconciled, owned and watched kind.
	Views map[schema.GroupVersionKind]CacheView
	// Declared are the kinds the sidecar declares for cached reads or
	// indexes: reads of them outside the cache are refused, not sent to the
	// API server, unless they ask for it.
	Declared map[schema.GroupVersionKind]bool
	// CRDs are the names of the CustomResourceDefinitions of the converted
	// kinds.
	CRDs map[schema.GroupKind]string
	// Service is the Service in front of the webhook server.
	Service Service
	// hostNamespaces are ResolveOptions.Namespaces.
	hostNamespaces []string
}

// Resolve looks every kind desc names up in mapper, once, and checks that the
// API server serves it, that the controllers' scopes fit (a namespaced object
// cannot own a cluster-scoped one, a cluster-scoped kind has no namespaces to
// declare, a label or annotation cannot name a namespaced object from a
// cluster-scoped one) and that a webhook's declared resource is the served
// one. It narrows the controllers to opts' limits and gives every cached kind
// its view. Every problem is reported. desc is not modified.
func Resolve(mapper meta.RESTMapper, desc *Description, opts ResolveOptions) (*Resolved, error) {
	d := desc.clone()
	r := &Resolved{Description: d, Kinds: map[schema.GroupVersionKind]Kind{}, CRDs: map[schema.GroupKind]string{}, hostNamespaces: slices.Clone(opts.Namespaces)}
	var errs []error
	lookup := func(gvk schema.GroupVersionKind, what string) bool {
		if _, ok := r.Kinds[gvk]; ok {
			return true
		}
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s, which the API server does not serve: %w", what, GVKString(gvk), err))
			return false
		}
		r.Kinds[gvk] = Kind{GVK: gvk, Resource: m.Resource.Resource, Namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
		return true
	}
	for _, c := range d.Controllers {
		if lookup(c.GVK, fmt.Sprintf("controller %q reconciles", c.Name)) && !r.Kinds[c.GVK].Namespaced && len(c.Namespaces) > 0 {
			errs = append(errs, fmt.Errorf("controller %q declares namespaces for %s, which is cluster-scoped", c.Name, GVKString(c.GVK)))
		}
	}
	for _, c := range d.Controllers {
		owner, ownerKnown := r.Kinds[c.GVK]
		for _, o := range c.Owns {
			if lookup(o.GVK, fmt.Sprintf("controller %q owns", c.Name)) && ownerKnown && owner.Namespaced && !r.Kinds[o.GVK].Namespaced {
				errs = append(errs, fmt.Errorf("controller %q owns %s, which is cluster-scoped, but reconciles %s, which is namespaced: a cluster-scoped object cannot have a namespaced owner",
					c.Name, GVKString(o.GVK), GVKString(c.GVK)))
			}
		}
		for _, w := range c.Watches {
			if lookup(w.GVK, fmt.Sprintf("controller %q watches", c.Name)) && len(w.FieldPath) == 0 && ownerKnown && owner.Namespaced && !r.Kinds[w.GVK].Namespaced {
				errs = append(errs, fmt.Errorf("controller %q watches %s, which is cluster-scoped, by a label or annotation naming a namespaced %s: it cannot say which namespace; watch it by field_path instead",
					c.Name, GVKString(w.GVK), GVKString(c.GVK)))
			}
		}
	}
	for _, ix := range d.Indexes {
		lookup(ix.GVK, fmt.Sprintf("index %q is on", ix.Name))
	}
	for _, ck := range d.CachedKinds {
		lookup(ck.GVK, "a cached kind is")
	}
	if !opts.WebhooksOff {
		// lookup appends to errs itself: take the other errors apart.
		webhookErrs := r.resolveWebhooks(mapper, lookup)
		errs = append(errs, webhookErrs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := r.narrow(opts.Namespaces, opts.LabelSelector); err != nil {
		return nil, err
	}
	views, err := r.views()
	if err != nil {
		return nil, err
	}
	if err := r.cacheDeclared(views); err != nil {
		return nil, err
	}
	r.Views = views
	r.Service = Service{Name: opts.ServiceName, Namespace: opts.ServiceNamespace}
	if r.Service.Name == "" {
		r.Service.Name = d.Name + "-webhook"
	}
	if r.Service.Namespace == "" {
		r.Service.Namespace = DefaultServiceNamespace()
	}
	return r, nil
}

// resolveWebhooks gives every webhook the resource its kind is served as, and
// every converted kind its CRD's name.
func (r *Resolved) resolveWebhooks(mapper meta.RESTMapper, lookup func(schema.GroupVersionKind, string) bool) []error {
	var errs []error
	for i := range r.Webhooks {
		wh := &r.Webhooks[i]
		if !lookup(wh.GVK, "the sidecar declares a webhook for") {
			continue
		}
		served := r.Kinds[wh.GVK].Resource
		if wh.Resource != "" && wh.Resource != served {
			errs = append(errs, fmt.Errorf("the sidecar declares a webhook for %s with resource %q, but the API server serves it as %q",
				GVKString(wh.GVK), wh.Resource, served))
		}
		wh.Resource = served
	}
	for _, c := range r.Conversions {
		m, err := mapper.RESTMapping(c.GroupKind)
		if err != nil {
			errs = append(errs, fmt.Errorf("the sidecar converts %s, which the API server does not serve: %w", c.GroupKind, err))
			continue
		}
		r.CRDs[c.GroupKind] = m.Resource.Resource + "." + c.GroupKind.Group
	}
	return errs
}

// narrow applies the host's namespaces, to the controllers of namespaced kinds
// only, and its label selector.
func (r *Resolved) narrow(namespaces []string, selector labels.Selector) error {
	var errs []error
	for i := range r.Controllers {
		one := &Description{Name: r.Name, Controllers: []Controller{r.Controllers[i]}}
		ns := namespaces
		if !r.Kinds[r.Controllers[i].GVK].Namespaced {
			ns = nil
		}
		if err := one.Narrow(ns, selector); err != nil {
			errs = append(errs, err)
		}
		r.Controllers[i] = one.Controllers[0]
	}
	return errors.Join(errs...)
}

// views gives each reconciled kind its controller's namespaces and label
// selector (two controllers of one kind must agree on them: the cache holds
// one view of each kind), and every owned and watched kind the namespaces of
// the controllers that own or watch it (every namespace when one of them
// watches every namespace), without their label selectors, which select
// reconciled objects only. A kind that a controller also reconciles keeps its
// reconciled view.
func (r *Resolved) views() (map[schema.GroupVersionKind]CacheView, error) {
	views := map[schema.GroupVersionKind]CacheView{}
	reconciledBy := map[schema.GroupVersionKind]Controller{}
	for _, c := range r.Controllers {
		if prev, ok := reconciledBy[c.GVK]; ok {
			if !reflect.DeepEqual(prev.Namespaces, c.Namespaces) || selectorString(prev.LabelSelector) != selectorString(c.LabelSelector) {
				return nil, fmt.Errorf("controllers %q and %q both reconcile %s but watch different namespaces or labels; the host caches one view of each kind",
					prev.Name, c.Name, GVKString(c.GVK))
			}
			continue
		}
		reconciledBy[c.GVK] = c
		var v CacheView
		if c.LabelSelector != nil && !c.LabelSelector.Empty() {
			v.Labels = c.LabelSelector
		}
		if r.Kinds[c.GVK].Namespaced && len(c.Namespaces) > 0 {
			v.Namespaces = slices.Clone(c.Namespaces)
		}
		views[c.GVK] = v
	}
	// A related kind seen with every namespace stays there.
	everywhere := map[schema.GroupVersionKind]bool{}
	add := func(c Controller, gvk schema.GroupVersionKind) {
		if _, reconciled := reconciledBy[gvk]; reconciled || everywhere[gvk] {
			return
		}
		if !r.Kinds[gvk].Namespaced || len(c.Namespaces) == 0 {
			everywhere[gvk] = true
			views[gvk] = CacheView{}
			return
		}
		v := views[gvk]
		for _, ns := range c.Namespaces {
			if !slices.Contains(v.Namespaces, ns) {
				v.Namespaces = append(v.Namespaces, ns)
			}
		}
		slices.Sort(v.Namespaces)
		views[gvk] = v
	}
	for _, c := range r.Controllers {
		for _, o := range c.Owns {
			add(c, o.GVK)
		}
		for _, w := range c.Watches {
			add(c, w.GVK)
		}
	}
	return views, nil
}

// selectorString is s as text, "" for none.
func selectorString(s labels.Selector) string {
	if s == nil {
		return ""
	}
	return s.String()
}

// WatchedKinds are the kinds the controllers reconcile, own or watch, each
// once, in the order they are declared.
func (d *Description) WatchedKinds() []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	add := func(gvk schema.GroupVersionKind) {
		if !slices.Contains(kinds, gvk) {
			kinds = append(kinds, gvk)
		}
	}
	for _, c := range d.Controllers {
		add(c.GVK)
		for _, o := range c.Owns {
			add(o.GVK)
		}
		for _, w := range c.Watches {
			add(w.GVK)
		}
	}
	return kinds
}

// WatchedNamespaces are the namespaces the host watches: those of every
// controller, as narrowed. None (every namespace) when a controller watches
// every namespace, or, without controllers, the host's own namespaces
// (ResolveOptions.Namespaces).
func (r *Resolved) WatchedNamespaces() []string {
	if len(r.Controllers) == 0 {
		return slices.Clone(r.hostNamespaces)
	}
	var out []string
	for _, c := range r.Controllers {
		if len(c.Namespaces) == 0 {
			return nil
		}
		for _, ns := range c.Namespaces {
			if !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	slices.Sort(out)
	return out
}

// ClusterScoped are the reconciled kinds whose objects live in no namespace.
func (r *Resolved) ClusterScoped() map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, c := range r.Controllers {
		if k, ok := r.Kinds[c.GVK]; ok && !k.Namespaced {
			out[c.GVK.GroupKind()] = true
		}
	}
	return out
}

// clone copies d deeply enough that narrowing and resolving the copy leave d
// as it is.
func (d *Description) clone() *Description {
	out := *d
	out.Controllers = slices.Clone(d.Controllers)
	for i := range out.Controllers {
		out.Controllers[i].Namespaces = slices.Clone(out.Controllers[i].Namespaces)
	}
	out.Webhooks = slices.Clone(d.Webhooks)
	out.Conversions = slices.Clone(d.Conversions)
	return &out
}

// GVKString writes a kind as errors and logs name it, for example
// Widget.example.com/v1.
func GVKString(gvk schema.GroupVersionKind) string {
	return gvk.Kind + "." + gvk.GroupVersion().String()
}

// CRDNames are the names of the CRDs of the converted kinds, in the order
// the conversions are declared.
func (r *Resolved) CRDNames() []string {
	out := make([]string, 0, len(r.Conversions))
	for _, c := range r.Conversions {
		out = append(out, r.CRDs[c.GroupKind])
	}
	return out
}
