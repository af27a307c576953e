package client

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
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

// Get reads the subresource into subResource. "status" reads the object
// (from the cache when the host caches the kind), as an object's status
// subresource is the object itself; any other subresource, such as the
// autoscaling/v1 Scale of "scale", is read from the API server.
func (s *subResourceClient) Get(ctx context.Context, obj, subResource ctrlclient.Object, _ ...ctrlclient.SubResourceGetOption) error {
	if s.name == "status" {
		return s.client.Get(ctx, ctrlclient.ObjectKeyFromObject(obj), subResource)
	}
	gvk, err := s.client.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	req := &polyopv1alpha1.GetRequest{Kind: gvkProto(gvk), Key: keyProto(obj.GetNamespace(), obj.GetName()), Subresource: s.name}
	var resp *polyopv1alpha1.GetResponse
	err = s.client.call(ctx, gvk, func() string { return "getting " + describeSub(gvk, obj, s.name) },
		func(ctx context.Context, callOpts ...grpc.CallOption) (err error) {
			resp, err = s.client.cluster.Get(ctx, req, callOpts...)
			return err
		})
	if err != nil {
		return err
	}
	return decodeSubresource(resp.GetObject(), subResource)
}

// Create creates the subresource of obj whose body is subResource, for
// example a policy/v1 Eviction of a Pod or an authentication/v1 TokenRequest
// of a ServiceAccount, and replaces subResource with what the API server
// answered (a TokenRequest with its token). An answer that is a Status, as
// for an eviction, leaves subResource as it was. DryRunAll and FieldOwner are
// honoured.
func (s *subResourceClient) Create(ctx context.Context, obj, subResource ctrlclient.Object, opts ...ctrlclient.SubResourceCreateOption) error {
	gvk, err := s.client.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	bodyGVK, err := s.client.GroupVersionKindFor(subResource)
	if err != nil {
		return err
	}
	co := &ctrlclient.SubResourceCreateOptions{}
	co.ApplyOptions(opts)
	data, err := encode(subResource, bodyGVK)
	if err != nil {
		return err
	}
	req := &polyopv1alpha1.CreateRequest{
		Kind:        gvkProto(gvk),
		Key:         keyProto(obj.GetNamespace(), obj.GetName()),
		Subresource: s.name,
		Options:     s.client.writeOptions(co.DryRun, co.FieldManager, false),
		Object:      data,
	}
	var resp *polyopv1alpha1.CreateResponse
	err = s.client.call(ctx, gvk, func() string { return "creating " + describeSub(gvk, obj, s.name) },
		func(ctx context.Context, callOpts ...grpc.CallOption) (err error) {
			resp, err = s.client.cluster.Create(ctx, req, callOpts...)
			return err
		})
	if err != nil {
		return err
	}
	return decodeSubresource(resp.GetObject(), subResource)
}

// decodeSubresource decodes the API server's answer about a subresource into
// subResource, as client-go's Result.Into does: a Status that says Success
// (what an eviction answers) leaves subResource as it was.
func decodeSubresource(data []byte, subResource ctrlclient.Object) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return fmt.Errorf("decoding the subresource: %w", err)
	}
	if meta.Kind == "Status" && meta.APIVersion == "v1" {
		return nil
	}
	return decodeInto(data, subResource, schema.FromAPIVersionAndKind(meta.APIVersion, meta.Kind))
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
