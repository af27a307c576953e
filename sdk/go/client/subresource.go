package client

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// Status returns a writer of the status subresource: Update and Patch write
// the object's status only, as with controller-runtime's client.
func (c *Client) Status() ctrlclient.SubResourceWriter {
	return &subResourceClient{client: c, name: "status"}
}

// SubResource returns a client of the named subresource, for example
// "status" or "scale". See the package documentation for what each call
// supports.
func (c *Client) SubResource(subResource string) ctrlclient.SubResourceClient {
	return &subResourceClient{client: c, name: subResource}
}

type subResourceClient struct {
	client *Client
	name   string
}

var _ ctrlclient.SubResourceClient = (*subResourceClient)(nil)

// Get reads the subresource into subResource. Only "status" is supported:
// the Cluster service reads whole objects, and an object's status
// subresource is the object itself.
func (s *subResourceClient) Get(ctx context.Context, obj, subResource ctrlclient.Object, _ ...ctrlclient.SubResourceGetOption) error {
	if s.name != "status" {
		return fmt.Errorf("polyop client: reading the %q subresource is not supported by the Cluster service; only \"status\" is", s.name)
	}
	return s.client.Get(ctx, ctrlclient.ObjectKeyFromObject(obj), subResource)
}

// Create is not supported: the Cluster service creates objects, not
// subresources such as evictions or tokens.
func (s *subResourceClient) Create(_ context.Context, obj, _ ctrlclient.Object, _ ...ctrlclient.SubResourceCreateOption) error {
	return fmt.Errorf("polyop client: creating the %q subresource of %s is not supported by the Cluster service", s.name, obj.GetName())
}

// Update replaces the subresource. Without a body (client.WithSubResourceBody)
// the subresource is obj's own, as for "status". A body of another kind, such
// as the autoscaling/v1 Scale of "scale", is sent as a merge patch of the
// subresource: the whole body, resourceVersion included, so that the update
// keeps its optimistic concurrency.
func (s *subResourceClient) Update(ctx context.Context, obj ctrlclient.Object, opts ...ctrlclient.SubResourceUpdateOption) error {
	uo := &ctrlclient.SubResourceUpdateOptions{}
	uo.ApplyOptions(opts)
	body := uo.SubResourceBody
	if body == nil {
		return s.client.update(ctx, obj, obj, s.name, &uo.UpdateOptions)
	}
	if body.GetName() == "" {
		body.SetName(obj.GetName())
	}
	if body.GetNamespace() == "" {
		body.SetNamespace(obj.GetNamespace())
	}
	po := &ctrlclient.PatchOptions{DryRun: uo.DryRun, FieldManager: uo.FieldManager}
	return s.client.patch(ctx, obj, body, s.name, ctrlclient.Merge, po)
}

// Patch patches the subresource of obj; the patch is computed from the body
// (client.WithSubResourceBody) when one is given, from obj otherwise.
func (s *subResourceClient) Patch(ctx context.Context, obj ctrlclient.Object, patch ctrlclient.Patch, opts ...ctrlclient.SubResourcePatchOption) error {
	po := &ctrlclient.SubResourcePatchOptions{}
	po.ApplyOptions(opts)
	body := po.SubResourceBody
	if body == nil {
		body = obj
	}
	return s.client.patch(ctx, obj, body, s.name, patch, &po.PatchOptions)
}

// Apply applies an apply configuration of the subresource with server-side
// apply.
func (s *subResourceClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...ctrlclient.SubResourceApplyOption) error {
	ao := &ctrlclient.SubResourceApplyOptions{}
	ao.ApplyOpts(opts)
	body := ao.SubResourceBody
	if body == nil {
		body = obj
	}
	return s.client.apply(ctx, obj, body, s.name, &ao.ApplyOptions)
}
