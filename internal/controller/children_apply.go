package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/polyop/polyop/internal/fencing"
	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/rawjson"
)

// childResult says what applyChildren did: counts for the log, and the
// problems that fail the reconcile, each recorded as an event on the owner.
type childResult struct {
	applied, unchanged, replaced, pruned int
	problems                             []childProblem
}

// err joins the problems' errors; nil when there is none.
func (res childResult) err() error {
	errs := make([]error, 0, len(res.problems))
	for _, p := range res.problems {
		errs = append(errs, p.err)
	}
	return errors.Join(errs...)
}

// applyChildren applies every desired child that changed, with server-side
// apply under the controller's field manager, forcing ownership of the fields
// it sets. A child whose applied configuration is the one last applied and
// whose observed state still holds every field of it is left alone: an
// unchanged child costs no request.
//
// A desired child that is not yet observed (owner controls no object of its
// name) is looked up in the cache first: an object of that name that another
// object controls, or that nobody controls when the kind does not declare
// adoption, is refused (see claim), and nothing is written to it. (The cache
// is the only source: an object created a moment before, which the cache has
// not seen yet, is applied over; the first reconcile that sees it controlled
// by another object refuses it, so two owners never take turns.) A child
// whose apply the API server refuses on an immutable field is deleted and
// applied again when its kind declares replacement, and refused otherwise.
//
// The applies run concurrently, at most maxConcurrentChildWrites at a time,
// Namespaces and CustomResourceDefinitions before the others (see
// writeTier). Each child's outcome is its own: every problem is reported, in
// the order of desired, whatever order the applies end in.
//
// When prune is set, and every desired child was applied, the children no
// longer desired are pruned (see pruneChildren).
func (r *Reconciler) applyChildren(ctx context.Context, owner client.Object, desired []desiredChild, observed []*object.Object, prune bool) childResult {
	observedByID := make(map[childID]*object.Object, len(observed))
	for _, o := range observed {
		observedByID[idOf(o)] = o
	}
	key := types.NamespacedName{Namespace: owner.GetNamespace(), Name: owner.GetName()}
	last := r.applied.children(key, owner.GetUID())

	// What happened to each desired child, at its index: decided from the
	// cache first, then by the writes.
	type outcome struct {
		applied   appliedChild
		unchanged bool
		replaced  bool
		problem   *childProblem
		refused   bool
	}
	outcomes := make([]outcome, len(desired))
	existing := make([]client.Object, len(desired))
	var writes []int
	for i, c := range desired {
		if o := observedByID[c.id]; o != nil {
			if prev, ok := findApplied(last, c.id); ok && prev.hash == c.hash && unchanged(o, c, prev.resourceVersion) {
				outcomes[i] = outcome{applied: prev, unchanged: true}
				continue
			}
			existing[i] = o
		} else {
			o, err := r.cachedChild(ctx, c.id)
			if err != nil {
				outcomes[i].problem = &childProblem{reason: reasonChildrenNotApplied, err: err}
				continue
			}
			if o != nil {
				existing[i] = o
			}
			if p := claim(c.id, existing[i], owner, c.kind); p != nil {
				outcomes[i] = outcome{problem: p, refused: true}
				continue
			}
		}
		writes = append(writes, i)
	}
	byTier(writes, func(i int) int { return writeTier(desired[i].id.gvk) }, func(tier []int) {
		inParallel(len(tier), r.maxConcurrentChildWrites, func(j int) {
			i := tier[j]
			c := desired[i]
			rv, replaced, p := r.applyChild(ctx, owner, c, existing[i], r.precondition(last, c.id, existing[i]))
			if p != nil {
				outcomes[i] = outcome{problem: p, refused: p.reason == reasonChildFieldImmutable}
				return
			}
			outcomes[i] = outcome{applied: appliedChild{id: c.id, hash: c.hash, resourceVersion: rv}, replaced: replaced}
		})
	})

	var res childResult
	now := make([]appliedChild, 0, len(desired))
	for i, o := range outcomes {
		gvk := desired[i].id.gvk
		switch {
		case o.problem != nil:
			res.problems = append(res.problems, *o.problem)
			if o.refused {
				r.countChild(gvk, childRefused)
			}
			continue
		case o.unchanged:
			res.unchanged++
			r.countChild(gvk, childUnchanged)
		default:
			res.applied++
			r.countChild(gvk, childApplied)
			if o.replaced {
				res.replaced++
			}
		}
		now = append(now, o.applied)
	}
	r.applied.record(key, owner.GetUID(), now)
	if len(res.problems) > 0 || !prune {
		return res
	}
	r.pruneChildren(ctx, observed, now, &res)
	return res
}

// applyChild applies c over existing (nil when the cache holds no object of
// its name) and returns the resourceVersion the apply wrote. When the API
// server refuses the apply because it changes an immutable field, and c's
// kind declares replacement, existing is deleted (with its UID as a
// precondition) and c applied again, which creates it; replaced says so.
//
// It runs in a span of its own, under the reconcile's.
func (r *Reconciler) applyChild(ctx context.Context, owner client.Object, c desiredChild, existing client.Object, precondition string) (resourceVersion string, replaced bool, problem *childProblem) {
	ctx, span := r.startWrite(ctx, spanApplyChild, childAttribute.String(c.id.String()))
	defer func() {
		span.SetAttributes(attribute.Bool("polyop.replaced", replaced))
		if problem != nil {
			endSpan(span, problem.err)
			return
		}
		endSpan(span, nil)
	}()
	out := c.configuration()
	out.precondition = precondition
	err := r.write(ctx, func(ctx context.Context) error {
		return r.Client.Apply(ctx, out, client.FieldOwner(r.fieldManager()), client.ForceOwnership)
	})
	if precondition != "" && apierrors.IsConflict(err) {
		err = r.applyAgain(ctx, owner, c, out, err)
	}
	if err == nil {
		return out.resourceVersion, false, nil
	}
	fields := immutableFields(err)
	switch {
	case fencing.IsLapsed(err):
		return "", false, &childProblem{reason: reasonChildrenNotApplied, err: fmt.Errorf("applying child %s: %w", c.id, err)}
	case len(fields) == 0:
		return "", false, &childProblem{reason: reasonChildrenNotApplied, err: fmt.Errorf("applying child %s: %w", c.id, err)}
	case !c.kind.ReplaceOnImmutable || existing == nil:
		return "", false, &childProblem{reason: reasonChildFieldImmutable, err: fmt.Errorf(
			"applying child %s: the API server refuses to change %s, which is immutable; the child is left as it is. "+
				"Declare replace_on_immutable for %s in the controller's Owns to have the host delete and recreate such a child",
			c.id, strings.Join(fields, ", "), c.id.gvk.Kind)}
	}
	err = r.write(ctx, func(ctx context.Context) error {
		return r.Client.Delete(ctx, existing, client.Preconditions{UID: ptr.To(existing.GetUID())}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return "", false, &childProblem{reason: reasonChildrenNotApplied, err: fmt.Errorf(
			"deleting child %s to replace it (%s is immutable): %w", c.id, strings.Join(fields, ", "), err)}
	}
	out = c.configuration()
	if err := r.write(ctx, func(ctx context.Context) error {
		return r.Client.Apply(ctx, out, client.FieldOwner(r.fieldManager()), client.ForceOwnership)
	}); err != nil {
		return "", false, &childProblem{reason: reasonChildrenNotApplied, err: fmt.Errorf(
			"creating child %s again after deleting it (%s is immutable): %w", c.id, strings.Join(fields, ", "), err)}
	}
	logf.FromContext(ctx).Info("replaced a child whose immutable fields changed", "child", c.id.String(), "fields", fields)
	r.Recorder.Eventf(owner, nil, corev1.EventTypeNormal, reasonChildReplaced, "Replace", "replaced child %s: %s is immutable", c.id, strings.Join(fields, ", "))
	return out.resourceVersion, true, nil
}

// precondition is the resourceVersion a fenced replica (one that holds a
// lease) applies desired child id with: the newest of the cached child's and
// the one the host's own last apply of it wrote (the cache may lag that
// write). A replica that was paused past its lease, and applies a child
// another replica has written since, then fails with a conflict instead of
// rolling that write back (docs/sharding.md). "" (no precondition) for a
// child the cache does not hold, which the apply creates, and for a
// replica without a lease.
func (r *Reconciler) precondition(last []appliedChild, id childID, existing client.Object) string {
	if r.fence == nil || existing == nil {
		return ""
	}
	rv := existing.GetResourceVersion()
	if prev, ok := findApplied(last, id); ok && prev.resourceVersion != "" {
		if cmp, err := resourceversion.CompareResourceVersion(prev.resourceVersion, rv); err == nil && cmp > 0 {
			rv = prev.resourceVersion
		}
	}
	return rv
}

// applyAgain applies out once more after its precondition failed: the child
// changed since the version the host read, most often because its own
// controller wrote its status. The child is read from the API server; if it
// is still the owner's, the apply is made again with the version read as
// its precondition (and through the fence again, so a replica whose term has
// ended meanwhile writes nothing).
func (r *Reconciler) applyAgain(ctx context.Context, owner client.Object, c desiredChild, out *childConfiguration, conflict error) error {
	if r.APIReader == nil {
		return conflict
	}
	live := object.New(c.id.gvk)
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: c.id.namespace, Name: c.id.name}, live); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted since: the apply creates it.
			out.precondition = ""
			return r.write(ctx, func(ctx context.Context) error {
				return r.Client.Apply(ctx, out, client.FieldOwner(r.fieldManager()), client.ForceOwnership)
			})
		}
		return fmt.Errorf("reading child %s again after its apply conflicted: %w", c.id, err)
	}
	if ref := metav1.GetControllerOfNoCopy(live); ref == nil || ref.UID != owner.GetUID() {
		return fmt.Errorf("child %s changed since it was read, and %s %s no longer controls it: %w",
			c.id, owner.GetObjectKind().GroupVersionKind().Kind, owner.GetName(), conflict)
	}
	out.precondition = live.GetResourceVersion()
	return r.write(ctx, func(ctx context.Context) error {
		return r.Client.Apply(ctx, out, client.FieldOwner(r.fieldManager()), client.ForceOwnership)
	})
}

// cachedChild reads the object id names from the cache; nil when there is
// none.
func (r *Reconciler) cachedChild(ctx context.Context, id childID) (*object.Object, error) {
	o := object.New(id.gvk)
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: id.namespace, Name: id.name}, o)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s from the cache before applying it: %w", id, err)
	}
	o.SetGroupVersionKind(id.gvk)
	return o, nil
}

// fieldManager is the field manager of the controller's children.
func (r *Reconciler) fieldManager() string {
	return "polyop/" + r.Controller.Name
}

// childConfiguration is a desired child's configuration as the client
// applies it (a runtime.ApplyConfiguration): its JSON, as validateChildren
// made it, is the request's body as it is, and of the API server's answer
// only the resourceVersion is read, without decoding the rest: the host
// keeps nothing else of it.
type childConfiguration struct {
	apiVersion, kind, namespace, name string
	raw                               []byte
	// metadataAt is the offset of raw's metadata object (see desiredChild).
	metadataAt int
	// precondition, when set, is the resourceVersion the child must have for
	// the apply to succeed: the API server answers any other with a
	// conflict.
	precondition string
	// resourceVersion is the answer's metadata.resourceVersion.
	resourceVersion string
}

var (
	_ runtime.ApplyConfiguration = &childConfiguration{}
	_ json.Marshaler             = &childConfiguration{}
	_ json.Unmarshaler           = &childConfiguration{}
)

// configuration is c's configuration, to apply.
func (c desiredChild) configuration() *childConfiguration {
	return &childConfiguration{apiVersion: c.apiVersion, kind: c.id.gvk.Kind, namespace: c.id.namespace, name: c.id.name, raw: c.raw, metadataAt: c.metadataAt}
}

// IsApplyConfiguration implements runtime.ApplyConfiguration.
func (*childConfiguration) IsApplyConfiguration() {}

// GetAPIVersion, GetKind, GetNamespace and GetName name the object to apply,
// as controller-runtime's client asks an apply configuration.
func (c *childConfiguration) GetAPIVersion() *string { return &c.apiVersion }
func (c *childConfiguration) GetKind() *string       { return &c.kind }
func (c *childConfiguration) GetNamespace() *string  { return &c.namespace }
func (c *childConfiguration) GetName() *string       { return &c.name }

// MarshalJSON is the configuration's JSON, the apply's body: raw, with the
// precondition's resourceVersion first in its metadata when there is one.
func (c *childConfiguration) MarshalJSON() ([]byte, error) {
	if c.precondition == "" || c.metadataAt <= 0 || c.metadataAt >= len(c.raw) || c.raw[c.metadataAt] != '{' {
		return c.raw, nil
	}
	out := make([]byte, 0, len(c.raw)+len(c.precondition)+24)
	out = append(out, c.raw[:c.metadataAt+1]...)
	out = append(out, `"resourceVersion":`...)
	out = rawjson.AppendString(out, c.precondition)
	if c.raw[c.metadataAt+1] != '}' {
		out = append(out, ',')
	}
	return append(out, c.raw[c.metadataAt+1:]...), nil
}

// UnmarshalJSON reads the resourceVersion of the API server's answer, a
// JSON object encoding/json has checked.
func (c *childConfiguration) UnmarshalJSON(data []byte) error {
	c.resourceVersion = ""
	err := rawjson.EachRaw(data, func(key []byte, metadata json.RawMessage) error {
		if string(key) != "metadata" {
			return nil
		}
		return rawjson.EachRaw(metadata, func(key []byte, value json.RawMessage) error {
			if string(key) != "resourceVersion" {
				return nil
			}
			if err := json.Unmarshal(value, &c.resourceVersion); err != nil {
				return fmt.Errorf("metadata.resourceVersion: %w", err)
			}
			return rawjson.Stop
		})
	})
	if err != nil {
		return fmt.Errorf("reading the answer to the apply of %s %s/%s: %w", c.kind, c.namespace, c.name, err)
	}
	return nil
}
