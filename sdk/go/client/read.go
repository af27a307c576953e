package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Get reads the object named key into obj: from the host's cache for the
// kinds the host watches, otherwise (or with Uncached) from the API server.
// Options other than the Client's own ReadOptions are ignored: the Cluster
// service reads the latest version.
func (c *Client) Get(ctx context.Context, key ctrlclient.ObjectKey, obj ctrlclient.Object, opts ...ctrlclient.GetOption) error {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	var ro readOptions
	for _, opt := range opts {
		ro.add(opt)
	}
	req := &polyopv1alpha1.GetRequest{
		Kind:    gvkProto(gvk),
		Key:     keyProto(key.Namespace, key.Name),
		Options: ro.proto(),
	}
	var resp *polyopv1alpha1.GetResponse
	err = c.call(ctx, gvk, func() string { return "getting " + describe(gvk, key.Namespace, key.Name) },
		func(ctx context.Context, callOpts ...grpc.CallOption) (err error) {
			resp, err = c.cluster.Get(ctx, req, callOpts...)
			return err
		})
	if err != nil {
		return err
	}
	ro.record(resp.GetSource())
	return decodeInto(resp.GetObject(), obj, gvk)
}

// List reads the objects of list's item kind that match opts into list: from a
// local index when opts select one exact value of a field indexed with
// IndexField (see there), else from
// the host's cache for the kinds the host watches, otherwise (or with
// Uncached) from the API server. Namespace, label and field selectors, limit
// and continue are honoured as the API server honours them; the cache
// ignores limit, returns every match, and selects only by the fields the host
// indexes.
func (c *Client) List(ctx context.Context, list ctrlclient.ObjectList, opts ...ctrlclient.ListOption) error {
	listGVK, err := c.GroupVersionKindFor(list)
	if err != nil {
		return err
	}
	var ro readOptions
	lo := &ctrlclient.ListOptions{}
	for _, opt := range opts {
		ro.add(opt)
		opt.ApplyToList(lo)
	}
	if !ro.uncached {
		if ok, err := c.listIndexed(ctx, list, listGVK, lo); ok {
			return err
		}
	}
	req := c.listRequest(listKind(listGVK), lo)
	req.Options = ro.proto()
	var resp *polyopv1alpha1.ListResponse
	err = c.call(ctx, listKind(listGVK), func() string { return "listing " + describeList(listKind(listGVK), lo.Namespace) },
		func(ctx context.Context, callOpts ...grpc.CallOption) (err error) {
			resp, err = c.cluster.List(ctx, req, callOpts...)
			return err
		})
	if err != nil {
		return err
	}
	ro.record(resp.GetSource())
	return decodeList(resp, list, listGVK)
}

// listRequest builds the request for the objects of the kind gvk.
func (c *Client) listRequest(gvk schema.GroupVersionKind, lo *ctrlclient.ListOptions) *polyopv1alpha1.ListRequest {
	req := &polyopv1alpha1.ListRequest{
		Kind:          gvkProto(gvk),
		Namespace:     lo.Namespace,
		Limit:         lo.Limit,
		ContinueToken: lo.Continue,
	}
	if lo.LabelSelector != nil {
		req.LabelSelector = lo.LabelSelector.String()
	}
	if lo.FieldSelector != nil {
		req.FieldSelector = lo.FieldSelector.String()
	}
	return req
}

// describeList names the objects of a kind in errors: "apps/v1 Deployment in
// default".
func describeList(gvk schema.GroupVersionKind, namespace string) string {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	if namespace == "" {
		return fmt.Sprintf("%s %s in every namespace", apiVersion, kind)
	}
	return fmt.Sprintf("%s %s in %s", apiVersion, kind, namespace)
}
