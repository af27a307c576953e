package sidecar

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	polyopv1alpha1 "github.com/polyop/polyop/gen/go/polyop/v1alpha1"
)

// ProtocolVersion is the version of the polyop protocol this host speaks.
const ProtocolVersion = "v1alpha1"

// Description is a sidecar's validated self-description.
type Description struct {
	// Name is the sidecar's name.
	Name string
	// Controllers are the controllers the sidecar implements, in the order it
	// declared them.
	Controllers []Controller
}

// Controller is one validated ControllerDescription.
type Controller struct {
	// Name is unique within the sidecar.
	Name string
	// GVK is the reconciled kind.
	GVK schema.GroupVersionKind
	// UpdateFilters are the changes that let an update event through; empty lets
	// every update through.
	UpdateFilters []polyopv1alpha1.UpdateFilter
	// LabelSelector limits the objects watched; labels.Everything() when none.
	LabelSelector labels.Selector
	// Namespaces limits the namespaces watched; empty means all.
	Namespaces []string
	// MaxConcurrentReconciles is at least 1.
	MaxConcurrentReconciles int
}

// NewDescription validates a DescribeResponse. Every problem is reported, each
// with the path of the offending field.
func NewDescription(resp *polyopv1alpha1.DescribeResponse) (*Description, error) {
	if v := resp.GetProtocolVersion(); v != ProtocolVersion {
		if v == "" {
			v = "(none)"
		}
		return nil, fmt.Errorf("protocol version mismatch: the sidecar speaks %s, this host speaks %s", v, ProtocolVersion)
	}
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	d := &Description{Name: resp.GetName()}
	if d.Name == "" {
		bad("name", "required")
	} else if msgs := validation.IsDNS1123Label(d.Name); len(msgs) > 0 {
		bad("name", "%q is not a valid name: %v", d.Name, msgs)
	}
	if len(resp.GetControllers()) == 0 {
		bad("controllers", "the sidecar declares no controllers")
	}
	seen := map[string]bool{}
	for i, c := range resp.GetControllers() {
		p := fmt.Sprintf("controllers[%d]", i)
		ctrl := Controller{
			Name:                    c.GetName(),
			MaxConcurrentReconciles: int(c.GetMaxConcurrentReconciles()),
			LabelSelector:           labels.Everything(),
			Namespaces:              c.GetNamespaces(),
		}
		switch {
		case ctrl.Name == "":
			bad(p+".name", "required")
		case len(validation.IsDNS1123Subdomain(ctrl.Name)) > 0:
			bad(p+".name", "%q is not a valid controller name: %v", ctrl.Name, validation.IsDNS1123Subdomain(ctrl.Name))
		case len(ctrl.Name) > 63:
			bad(p+".name", "%q is longer than 63 characters", ctrl.Name)
		case seen[ctrl.Name]:
			bad(p+".name", "duplicate controller name %q", ctrl.Name)
		}
		seen[ctrl.Name] = true
		k := c.GetForKind()
		ctrl.GVK = schema.GroupVersionKind{Group: k.GetGroup(), Version: k.GetVersion(), Kind: k.GetKind()}
		if ctrl.GVK.Version == "" {
			bad(p+".for_kind.version", "required")
		}
		if ctrl.GVK.Kind == "" {
			bad(p+".for_kind.kind", "required")
		}
		for j, f := range c.GetPredicates().GetUpdateFilters() {
			if _, known := polyopv1alpha1.UpdateFilter_name[int32(f)]; !known || f == polyopv1alpha1.UpdateFilter_UPDATE_FILTER_UNSPECIFIED {
				bad(fmt.Sprintf("%s.predicates.update_filters[%d]", p, j), "unknown update filter %d", int32(f))
				continue
			}
			if !slices.Contains(ctrl.UpdateFilters, f) {
				ctrl.UpdateFilters = append(ctrl.UpdateFilters, f)
			}
		}
		if s := c.GetPredicates().GetLabelSelector(); s != "" {
			sel, err := labels.Parse(s)
			if err != nil {
				bad(p+".predicates.label_selector", "%v", err)
			} else {
				ctrl.LabelSelector = sel
			}
		}
		for j, ns := range ctrl.Namespaces {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				bad(fmt.Sprintf("%s.namespaces[%d]", p, j), "%q is not a valid namespace: %v", ns, msgs)
			}
		}
		switch n := c.GetMaxConcurrentReconciles(); {
		case n < 0:
			bad(p+".max_concurrent_reconciles", "must not be negative, got %d", n)
		case n == 0:
			ctrl.MaxConcurrentReconciles = 1
		}
		d.Controllers = append(d.Controllers, ctrl)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("invalid sidecar description: %w", err)
	}
	return d, nil
}

// Narrow applies the host's own limits to every controller: the namespaces the
// host may watch (empty: no limit) and a label selector every watched object
// must also match. It narrows and never widens: a controller keeps only the
// namespaces both it and the host allow, and a controller left with none is an
// error.
func (d *Description) Narrow(namespaces []string, selector labels.Selector) error {
	var errs []error
	for i := range d.Controllers {
		c := &d.Controllers[i]
		if len(namespaces) > 0 {
			switch {
			case len(c.Namespaces) == 0:
				c.Namespaces = slices.Clone(namespaces)
			default:
				var keep []string
				for _, ns := range c.Namespaces {
					if slices.Contains(namespaces, ns) {
						keep = append(keep, ns)
					}
				}
				if len(keep) == 0 {
					errs = append(errs, fmt.Errorf("controller %q watches namespaces %v, none of which the host may watch (%v)", c.Name, c.Namespaces, namespaces))
				}
				c.Namespaces = keep
			}
		}
		if selector != nil && !selector.Empty() {
			reqs, _ := selector.Requirements()
			c.LabelSelector = c.LabelSelector.Add(reqs...)
		}
	}
	return errors.Join(errs...)
}
