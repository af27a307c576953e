package description

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// ProtocolVersion is the version of the polyop protocol this host speaks, as
// the contract's generated code names it.
const ProtocolVersion = polyopv1alpha1.ProtocolVersion_PROTOCOL_VERSION_V1ALPHA1

// Description is a sidecar's validated self-description.
type Description struct {
	// Name is the sidecar's name.
	Name string
	// SDKName and SDKVersion name the SDK the sidecar is built on, for the
	// host's logs; empty when the sidecar says none.
	SDKName, SDKVersion string
	// Controllers are the controllers the sidecar implements, in the order it
	// declared them.
	Controllers []Controller
	// Webhooks are the admission webhooks the sidecar implements.
	Webhooks []Webhook
	// Conversions are the kinds whose versions the sidecar converts.
	Conversions []Conversion
	// Indexes are the cache indexes the sidecar declares.
	Indexes []Index
	// CachedKinds are the kinds the sidecar declares for cached reads.
	CachedKinds []CachedKind
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
	// Owns are the kinds of the children the controller owns.
	Owns []Owned
	// Watches map events on other kinds to reconciled objects.
	Watches []Watch
	// Finalizer is the finalizer the host manages for the controller; empty
	// for none.
	Finalizer string
	// SkipUnchangedInputs lets the host skip a Reconcile call whose inputs
	// are those of the last successful answer (see
	// ControllerDescription.skip_unchanged_inputs).
	SkipUnchangedInputs bool
}

// Owned is one owned child kind.
type Owned struct {
	// GVK is the child kind.
	GVK schema.GroupVersionKind
	// SendObserved asks for the observed children in each ReconcileRequest.
	SendObserved bool
	// Adopt lets the host adopt an existing object of the kind that has no
	// controller owner when a desired child names it.
	Adopt bool
	// ReplaceOnImmutable lets the host delete and create again a child whose
	// apply the API server refuses on an immutable field.
	ReplaceOnImmutable bool
}

// Watch maps events on objects of GVK to reconciled objects. Exactly one of
// Label, Annotation and FieldPath is set.
type Watch struct {
	// GVK is the watched kind.
	GVK schema.GroupVersionKind
	// Label is a label of the watched object naming the reconciled object.
	Label string
	// Annotation is an annotation of the watched object naming the reconciled
	// object.
	Annotation string
	// FieldPath is a dot-separated path of a field of the reconciled kind
	// holding the watched object's name, split into its segments.
	FieldPath []string
}

// Webhook is one validated WebhookDescription.
type Webhook struct {
	// GVK is the kind, at the version the webhook receives.
	GVK schema.GroupVersionKind
	// Resource is the kind's resource; empty until resolved.
	Resource string
	// Default and Validate say which webhooks the sidecar serves.
	Default, Validate bool
	// Operations are the admitted operations, create and update when none were
	// declared.
	Operations []polyopv1alpha1.Operation
	// FailurePolicy is Fail or Ignore (never unspecified).
	FailurePolicy polyopv1alpha1.FailurePolicy
	// TimeoutSeconds is the API server's timeout, 1 to 30.
	TimeoutSeconds int32
}

// Conversion is one validated ConversionDescription.
type Conversion struct {
	// GroupKind is the converted kind.
	GroupKind schema.GroupKind
	// Versions are the versions converted between, at least two.
	Versions []string
}

// NewDescription validates a DescribeResponse. Every problem is reported, each
// with the path of the offending field.
func NewDescription(resp *polyopv1alpha1.DescribeResponse) (*Description, error) {
	if v := resp.GetProtocolVersion(); v != ProtocolVersion {
		said := v.String()
		if v == polyopv1alpha1.ProtocolVersion_PROTOCOL_VERSION_UNSPECIFIED {
			said += " (it set no protocol_version)"
		}
		return nil, fmt.Errorf("protocol version mismatch: the sidecar speaks %s, this host speaks %s", said, ProtocolVersion)
	}
	var errs []error
	var bad reporter = func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	d := &Description{Name: resp.GetName(), SDKName: resp.GetSdkName(), SDKVersion: resp.GetSdkVersion()}
	if d.Name == "" {
		bad("name", "required")
	} else if msgs := validation.IsDNS1123Label(d.Name); len(msgs) > 0 {
		bad("name", "%q is not a valid name: %v", d.Name, msgs)
	}
	if len(resp.GetControllers()) == 0 && len(resp.GetWebhooks()) == 0 && len(resp.GetConversions()) == 0 {
		bad("controllers", "the sidecar declares no controllers, webhooks or conversions")
	}
	seen := map[string]bool{}
	for i, c := range resp.GetControllers() {
		p := fmt.Sprintf("controllers[%d]", i)
		ctrl := Controller{
			Name:                    c.GetName(),
			MaxConcurrentReconciles: int(c.GetMaxConcurrentReconciles()),
			LabelSelector:           labels.Everything(),
			Namespaces:              c.GetNamespaces(),
			SkipUnchangedInputs:     c.GetSkipUnchangedInputs(),
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
		ctrl.GVK = gvkOf(p+".for_kind", c.GetForKind(), bad)
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
		ctrl.Owns, ctrl.Watches, ctrl.Finalizer = children(p, c, bad)
		if ctrl.SkipUnchangedInputs && len(c.GetWatches()) > 0 {
			// A watched object reaches the sidecar through the Cluster
			// service, not the request: the host cannot tell it changed.
			bad(p+".skip_unchanged_inputs", "a controller that declares watches reads objects other than its inputs; "+
				"leave skip_unchanged_inputs false, or drop the watches")
		}
		d.Controllers = append(d.Controllers, ctrl)
	}
	d.Webhooks = webhooks(resp.GetWebhooks(), bad)
	d.Conversions = conversions(resp.GetConversions(), bad)
	d.Indexes = indexes(resp.GetIndexes(), bad)
	d.CachedKinds = cachedKinds(resp.GetCachedKinds(), bad)
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

// reporter records one problem with a field of the description.
type reporter func(path, format string, args ...any)

// gvkOf validates a GroupVersionKind field: version and kind are required.
func gvkOf(path string, k *polyopv1alpha1.GroupVersionKind, bad reporter) schema.GroupVersionKind {
	gvk := schema.GroupVersionKind{Group: k.GetGroup(), Version: k.GetVersion(), Kind: k.GetKind()}
	if gvk.Version == "" {
		bad(path+".version", "required")
	}
	if gvk.Kind == "" {
		bad(path+".kind", "required")
	}
	return gvk
}

// children validates what a controller declares about other objects: owned
// kinds, watches and its finalizer.
func children(p string, c *polyopv1alpha1.ControllerDescription, bad reporter) ([]Owned, []Watch, string) {
	var owns []Owned
	seen := map[schema.GroupVersionKind]bool{}
	for i, o := range c.GetOwns() {
		path := fmt.Sprintf("%s.owns[%d]", p, i)
		gvk := gvkOf(path+".kind", o.GetKind(), bad)
		if seen[gvk] {
			bad(path+".kind", "%s is declared twice", gvk)
		}
		seen[gvk] = true
		owns = append(owns, Owned{GVK: gvk, SendObserved: o.GetSendObserved(), Adopt: o.GetAdopt(), ReplaceOnImmutable: o.GetReplaceOnImmutable()})
	}
	var watches []Watch
	for i, w := range c.GetWatches() {
		path := fmt.Sprintf("%s.watches[%d]", p, i)
		watch := Watch{GVK: gvkOf(path+".kind", w.GetKind(), bad)}
		switch m := w.GetMapping().(type) {
		case *polyopv1alpha1.Watch_Label:
			watch.Label = m.Label
			if msgs := validation.IsQualifiedName(m.Label); len(msgs) > 0 {
				bad(path+".label", "%q is not a valid label key: %v", m.Label, msgs)
			}
		case *polyopv1alpha1.Watch_Annotation:
			watch.Annotation = m.Annotation
			if msgs := validation.IsQualifiedName(m.Annotation); len(msgs) > 0 {
				bad(path+".annotation", "%q is not a valid annotation key: %v", m.Annotation, msgs)
			}
		case *polyopv1alpha1.Watch_FieldPath:
			watch.FieldPath = strings.Split(m.FieldPath, ".")
			if slices.Contains(watch.FieldPath, "") {
				bad(path+".field_path", "%q is not a dot-separated field path such as spec.configMapName", m.FieldPath)
			}
		default:
			bad(path, "one of label, annotation or field_path is required")
		}
		watches = append(watches, watch)
	}
	finalizer := c.GetFinalizer()
	if finalizer != "" {
		if msgs := validation.IsQualifiedName(finalizer); len(msgs) > 0 {
			bad(p+".finalizer", "%q is not a valid finalizer name: %v", finalizer, msgs)
		} else if !strings.Contains(finalizer, "/") {
			bad(p+".finalizer", "%q needs a domain prefix, for example example.com/%s", finalizer, finalizer)
		}
	}
	return owns, watches, finalizer
}

// webhooks validates the declared admission webhooks.
func webhooks(in []*polyopv1alpha1.WebhookDescription, bad reporter) []Webhook {
	var out []Webhook
	seen := map[schema.GroupVersionKind]bool{}
	for i, w := range in {
		path := fmt.Sprintf("webhooks[%d]", i)
		wh := Webhook{
			GVK:            gvkOf(path+".kind", w.GetKind(), bad),
			Resource:       w.GetResource(),
			Default:        w.GetDefault(),
			Validate:       w.GetValidate(),
			FailurePolicy:  w.GetFailurePolicy(),
			TimeoutSeconds: w.GetTimeoutSeconds(),
		}
		if seen[wh.GVK] {
			bad(path+".kind", "%s is declared twice: declare default and validate in one webhook", wh.GVK)
		}
		seen[wh.GVK] = true
		if !wh.Default && !wh.Validate {
			bad(path, "neither default nor validate is set")
		}
		for j, op := range w.GetOperations() {
			if _, known := polyopv1alpha1.Operation_name[int32(op)]; !known || op == polyopv1alpha1.Operation_OPERATION_UNSPECIFIED {
				bad(fmt.Sprintf("%s.operations[%d]", path, j), "unknown operation %d", int32(op))
				continue
			}
			if !slices.Contains(wh.Operations, op) {
				wh.Operations = append(wh.Operations, op)
			}
		}
		if len(wh.Operations) == 0 {
			wh.Operations = []polyopv1alpha1.Operation{polyopv1alpha1.Operation_OPERATION_CREATE, polyopv1alpha1.Operation_OPERATION_UPDATE}
		}
		switch wh.FailurePolicy {
		case polyopv1alpha1.FailurePolicy_FAILURE_POLICY_UNSPECIFIED:
			wh.FailurePolicy = polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL
		case polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL, polyopv1alpha1.FailurePolicy_FAILURE_POLICY_IGNORE:
		default:
			bad(path+".failure_policy", "unknown failure policy %d", int32(wh.FailurePolicy))
		}
		switch t := wh.TimeoutSeconds; {
		case t == 0:
			wh.TimeoutSeconds = 10
		case t < 1 || t > 30:
			bad(path+".timeout_seconds", "must be between 1 and 30, got %d", t)
		}
		out = append(out, wh)
	}
	return out
}

// conversions validates the declared conversions.
func conversions(in []*polyopv1alpha1.ConversionDescription, bad reporter) []Conversion {
	var out []Conversion
	seen := map[schema.GroupKind]bool{}
	for i, c := range in {
		path := fmt.Sprintf("conversions[%d]", i)
		conv := Conversion{GroupKind: schema.GroupKind{Group: c.GetKind().GetGroup(), Kind: c.GetKind().GetKind()}, Versions: c.GetVersions()}
		if conv.GroupKind.Group == "" {
			bad(path+".kind.group", "required: only custom resources are converted by webhooks")
		}
		if conv.GroupKind.Kind == "" {
			bad(path+".kind.kind", "required")
		}
		if seen[conv.GroupKind] {
			bad(path, "%s is declared twice", conv.GroupKind)
		}
		seen[conv.GroupKind] = true
		distinct := map[string]bool{}
		for j, v := range conv.Versions {
			switch msgs := validation.IsDNS1035Label(v); {
			case len(msgs) > 0:
				bad(fmt.Sprintf("%s.versions[%d]", path, j), "%q is not a valid version name: %v", v, msgs)
			case distinct[v]:
				bad(fmt.Sprintf("%s.versions[%d]", path, j), "%q is declared twice", v)
			}
			distinct[v] = true
		}
		if len(distinct) < 2 {
			bad(path+".versions", "at least two versions are required, got %q", conv.Versions)
		}
		out = append(out, conv)
	}
	return out
}
