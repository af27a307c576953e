package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// deleteAllOfPageSize is how many objects DeleteAllOf lists at a time.
const deleteAllOfPageSize = 500

// Create creates obj and replaces it with the object as the API server stored
// it. DryRunAll and FieldOwner are honoured; FieldValidation is left to the
// API server's default.
func (c *Client) Create(ctx context.Context, obj ctrlclient.Object, opts ...ctrlclient.CreateOption) error {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	co := (&ctrlclient.CreateOptions{}).ApplyOptions(opts)
	data, err := encode(obj, gvk)
	if err != nil {
		return err
	}
	req := &polyopv1alpha1.CreateRequest{
		Kind:    gvkProto(gvk),
		Key:     keyProto(obj.GetNamespace(), obj.GetName()),
		Options: c.writeOptions(co.DryRun, co.FieldManager, false),
		Object:  data,
	}
	var resp *polyopv1alpha1.CreateResponse
	err = c.call(ctx, gvk, func() string { return "creating " + describe(gvk, obj.GetNamespace(), nameOf(obj)) },
		func(ctx context.Context, callOpts ...grpc.CallOption) (err error) {
			resp, err = c.cluster.Create(ctx, req, callOpts...)
			return err
		})
	if err != nil {
		return err
	}
	return decodeInto(resp.GetObject(), obj, gvk)
}

// Update replaces obj, with optimistic concurrency on its resourceVersion,
// and replaces obj with the object as the API server stored it.
func (c *Client) Update(ctx context.Context, obj ctrlclient.Object, opts ...ctrlclient.UpdateOption) error {
	uo := (&ctrlclient.UpdateOptions{}).ApplyOptions(opts)
	return c.update(ctx, obj, obj, "", uo)
}

// update sends an UpdateRequest for body, the object or, for a subresource,
// its body, and decodes the answer into body.
func (c *Client) update(ctx context.Context, obj, body ctrlclient.Object, subresource string, uo *ctrlclient.UpdateOptions) error {
	gvk, err := c.GroupVersionKindFor(body)
	if err != nil {
		return err
	}
	data, err := encode(body, gvk)
	if err != nil {
		return err
	}
	req := &polyopv1alpha1.UpdateRequest{
		Kind:        gvkProto(gvk),
		Key:         keyProto(obj.GetNamespace(), obj.GetName()),
		Subresource: subresource,
		Options:     c.writeOptions(uo.DryRun, uo.FieldManager, false),
		Object:      data,
	}
	var resp *polyopv1alpha1.UpdateResponse
	err = c.call(ctx, gvk, func() string { return "updating " + describeSub(gvk, obj, subresource) },
		func(ctx context.Context, callOpts ...grpc.CallOption) (err error) {
			resp, err = c.cluster.Update(ctx, req, callOpts...)
			return err
		})
	if err != nil {
		return err
	}
	return decodeInto(resp.GetObject(), body, gvk)
}

// Patch patches obj and replaces it with the object as the API server stored
// it. Merge (client.Merge, client.MergeFrom), JSON (client.RawPatch with
// types.JSONPatchType), strategic merge (client.StrategicMergeFrom) and
// server-side apply (client.Apply, with client.FieldOwner and
// client.ForceOwnership) patches are supported. For an apply patch of a typed
// object whose apiVersion and kind are unset, they are set from the scheme.
func (c *Client) Patch(ctx context.Context, obj ctrlclient.Object, patch ctrlclient.Patch, opts ...ctrlclient.PatchOption) error {
	po := (&ctrlclient.PatchOptions{}).ApplyOptions(opts)
	return c.patch(ctx, obj, obj, "", patch, po)
}

// patch sends a PatchRequest for obj's kind and name, with the patch computed
// from body (obj, or a subresource's body), and decodes the answer into body.
func (c *Client) patch(ctx context.Context, obj, body ctrlclient.Object, subresource string, patch ctrlclient.Patch, po *ctrlclient.PatchOptions) error {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	bodyGVK := gvk
	if body != obj {
		if bodyGVK, err = c.GroupVersionKindFor(body); err != nil {
			return err
		}
	}
	patchType, err := patchTypeOf(patch.Type())
	if err != nil {
		return err
	}
	if patchType == polyopv1alpha1.PatchType_PATCH_TYPE_APPLY && body.GetObjectKind().GroupVersionKind().Empty() {
		body.GetObjectKind().SetGroupVersionKind(bodyGVK)
	}
	data, err := patch.Data(body)
	if err != nil {
		return fmt.Errorf("polyop client: computing the patch of %s: %w", describe(gvk, obj.GetNamespace(), obj.GetName()), err)
	}
	req := &polyopv1alpha1.PatchRequest{
		Kind:        gvkProto(gvk),
		Key:         keyProto(obj.GetNamespace(), obj.GetName()),
		Subresource: subresource,
		Options:     c.writeOptions(po.DryRun, po.FieldManager, po.Force != nil && *po.Force),
		Patch:       data,
		Type:        patchType,
	}
	var resp *polyopv1alpha1.PatchResponse
	err = c.call(ctx, gvk, func() string { return "patching " + describeSub(gvk, obj, subresource) },
		func(ctx context.Context, callOpts ...grpc.CallOption) (err error) {
			resp, err = c.cluster.Patch(ctx, req, callOpts...)
			return err
		})
	if err != nil {
		return err
	}
	return decodeInto(resp.GetObject(), body, bodyGVK)
}

func patchTypeOf(t types.PatchType) (polyopv1alpha1.PatchType, error) {
	switch t {
	case types.MergePatchType:
		return polyopv1alpha1.PatchType_PATCH_TYPE_MERGE, nil
	case types.JSONPatchType:
		return polyopv1alpha1.PatchType_PATCH_TYPE_JSON, nil
	case types.StrategicMergePatchType:
		return polyopv1alpha1.PatchType_PATCH_TYPE_STRATEGIC_MERGE, nil
	case types.ApplyPatchType:
		return polyopv1alpha1.PatchType_PATCH_TYPE_APPLY, nil
	default:
		return polyopv1alpha1.PatchType_PATCH_TYPE_UNSPECIFIED, fmt.Errorf("polyop client: patch type %q is not supported (%s, %s, %s or %s)",
			t, types.MergePatchType, types.JSONPatchType, types.StrategicMergePatchType, types.ApplyPatchType)
	}
}

// Apply applies an apply configuration (for example
// appsv1ac.Deployment(name, namespace)...) with server-side apply, and
// decodes the answer into it.
func (c *Client) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...ctrlclient.ApplyOption) error {
	ao := &ctrlclient.ApplyOptions{}
	ao.ApplyOptions(opts)
	return c.apply(ctx, obj, obj, "", ao)
}

// apply applies body, an apply configuration of the object obj (or of its
// subresource), and decodes the answer into body.
func (c *Client) apply(ctx context.Context, obj, body runtime.ApplyConfiguration, subresource string, ao *ctrlclient.ApplyOptions) error {
	target, err := applyTarget(obj)
	if err != nil {
		return err
	}
	data := target.data
	if body != obj {
		if data, err = json.Marshal(body); err != nil {
			return fmt.Errorf("polyop client: encoding the apply configuration: %w", err)
		}
	}
	gvk := target.gvk()
	req := &polyopv1alpha1.PatchRequest{
		Kind:        gvkProto(gvk),
		Key:         keyProto(target.Metadata.Namespace, target.Metadata.Name),
		Subresource: subresource,
		Options:     c.writeOptions(ao.DryRun, ao.FieldManager, ao.Force != nil && *ao.Force),
		Patch:       data,
		Type:        polyopv1alpha1.PatchType_PATCH_TYPE_APPLY,
	}
	var resp *polyopv1alpha1.PatchResponse
	err = c.call(ctx, gvk, func() string {
		what := "applying " + describe(gvk, target.Metadata.Namespace, target.Metadata.Name)
		if subresource != "" {
			what += " (" + subresource + ")"
		}
		return what
	}, func(ctx context.Context, callOpts ...grpc.CallOption) (err error) {
		resp, err = c.cluster.Patch(ctx, req, callOpts...)
		return err
	})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(resp.GetObject(), body); err != nil {
		return fmt.Errorf("polyop client: decoding the applied %s: %w", gvk.Kind, err)
	}
	return nil
}

// appliedObject is an apply configuration's JSON and the fields that name it.
type appliedObject struct {
	objectMeta
	data []byte
}

func applyTarget(obj runtime.ApplyConfiguration) (*appliedObject, error) {
	if obj == nil {
		return nil, errors.New("polyop client: the apply configuration is nil")
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("polyop client: encoding the apply configuration: %w", err)
	}
	t := &appliedObject{data: data}
	if err := json.Unmarshal(data, &t.objectMeta); err != nil {
		return nil, fmt.Errorf("polyop client: reading the apply configuration: %w", err)
	}
	if t.APIVersion == "" || t.Kind == "" {
		return nil, errors.New("polyop client: the apply configuration has no apiVersion or kind")
	}
	if t.Metadata.Name == "" {
		return nil, errors.New("polyop client: the apply configuration has no name")
	}
	return t, nil
}

// Delete deletes obj. PropagationPolicy, Preconditions, GracePeriodSeconds
// and DryRunAll are honoured.
func (c *Client) Delete(ctx context.Context, obj ctrlclient.Object, opts ...ctrlclient.DeleteOption) error {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	do := (&ctrlclient.DeleteOptions{}).ApplyOptions(opts)
	return c.delete(ctx, gvk, obj.GetNamespace(), obj.GetName(), do.AsDeleteOptions())
}

func (c *Client) delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, do *metav1.DeleteOptions) error {
	req := &polyopv1alpha1.DeleteRequest{
		Kind:               gvkProto(gvk),
		Key:                keyProto(namespace, name),
		Options:            c.writeOptions(do.DryRun, "", false),
		Propagation:        propagationOf(do.PropagationPolicy),
		GracePeriodSeconds: do.GracePeriodSeconds,
	}
	if p := do.Preconditions; p != nil {
		if p.UID != nil {
			req.PreconditionUid = string(*p.UID)
		}
		if p.ResourceVersion != nil {
			req.PreconditionResourceVersion = *p.ResourceVersion
		}
	}
	return c.call(ctx, gvk, func() string { return "deleting " + describe(gvk, namespace, name) },
		func(ctx context.Context, callOpts ...grpc.CallOption) error {
			_, err := c.cluster.Delete(ctx, req, callOpts...)
			return err
		})
}

func propagationOf(p *metav1.DeletionPropagation) polyopv1alpha1.DeletePropagation {
	if p == nil {
		return polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_UNSPECIFIED
	}
	switch *p {
	case metav1.DeletePropagationBackground:
		return polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_BACKGROUND
	case metav1.DeletePropagationForeground:
		return polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_FOREGROUND
	case metav1.DeletePropagationOrphan:
		return polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_ORPHAN
	default:
		return polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_UNSPECIFIED
	}
}

// DeleteAllOf deletes every object of obj's kind that matches opts' namespace
// and selectors. The Cluster service has no delete-collection call, so
// DeleteAllOf lists the objects from the API server, a page at a time, and
// deletes each with opts' delete options. It is not atomic: objects created
// meanwhile may be missed, objects already gone are skipped, and when some
// deletions fail the others still happen and the errors are joined.
func (c *Client) DeleteAllOf(ctx context.Context, obj ctrlclient.Object, opts ...ctrlclient.DeleteAllOfOption) error {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	dao := &ctrlclient.DeleteAllOfOptions{}
	dao.ApplyOptions(opts)
	do := dao.AsDeleteOptions()
	req := c.listRequest(gvk, &dao.ListOptions)
	req.Options = &polyopv1alpha1.ReadOptions{Uncached: true}
	req.Limit = deleteAllOfPageSize
	var errs []error
	for {
		var resp *polyopv1alpha1.ListResponse
		err := c.call(ctx, gvk, func() string { return "listing " + describeList(gvk, dao.Namespace) + " to delete them" },
			func(ctx context.Context, callOpts ...grpc.CallOption) (err error) {
				resp, err = c.cluster.List(ctx, req, callOpts...)
				return err
			})
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		for _, item := range resp.GetItems() {
			var m objectMeta
			if err := json.Unmarshal(item, &m); err != nil {
				errs = append(errs, fmt.Errorf("polyop client: reading a listed %s: %w", gvk.Kind, err))
				continue
			}
			err := c.delete(ctx, gvk, m.Metadata.Namespace, m.Metadata.Name, do)
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
		if resp.GetContinueToken() == "" {
			return errors.Join(errs...)
		}
		req.ContinueToken = resp.GetContinueToken()
	}
}

// nameOf is obj's name, or its generateName followed by "*".
func nameOf(obj ctrlclient.Object) string {
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		return obj.GetGenerateName() + "*"
	}
	return obj.GetName()
}

// describeSub names obj, or one of its subresources, in errors.
func describeSub(gvk schema.GroupVersionKind, obj ctrlclient.Object, subresource string) string {
	what := describe(gvk, obj.GetNamespace(), obj.GetName())
	if subresource != "" {
		what += " (" + subresource + ")"
	}
	return what
}
