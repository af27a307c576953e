package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Get implements polyopv1alpha1.ClusterServiceServer.
func (s *Server) Get(ctx context.Context, req *polyopv1alpha1.GetRequest) (*polyopv1alpha1.GetResponse, error) {
	m, err := s.mapping(req.GetKind())
	if err != nil {
		return nil, err
	}
	key, err := objectKey(m, req.GetKey())
	if err != nil {
		return nil, err
	}
	if err := s.allowRead("get", m, key.Namespace, key.Name); err != nil {
		return nil, err
	}
	if sub := req.GetSubresource(); sub != "" && sub != "status" {
		return s.getSubresource(ctx, m, key, sub)
	}
	reader, source, err := s.reader(m, key.Namespace, req.GetOptions().GetUncached())
	if err != nil {
		return nil, err
	}
	obj, opts := readTarget(m.GroupVersionKind, source)
	if err := reader.Get(ctx, key, obj, opts...); err != nil {
		return nil, toStatus(err)
	}
	setKindIfMissing(obj, m.GroupVersionKind)
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, toStatus(err)
	}
	return &polyopv1alpha1.GetResponse{Object: raw, Source: source}, nil
}

// getSubresource reads the subresource sub of the object named key from the
// API server: the cache holds objects, not their subresources.
func (s *Server) getSubresource(ctx context.Context, m *meta.RESTMapping, key client.ObjectKey, sub string) (*polyopv1alpha1.GetResponse, error) {
	out, err := s.resource(m, key.Namespace).Get(ctx, key.Name, metav1.GetOptions{}, sub)
	if err != nil {
		return nil, toStatus(err)
	}
	raw, err := out.MarshalJSON()
	if err != nil {
		return nil, toStatus(err)
	}
	return &polyopv1alpha1.GetResponse{Object: raw, Source: polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER}, nil
}

// List implements polyopv1alpha1.ClusterServiceServer.
func (s *Server) List(ctx context.Context, req *polyopv1alpha1.ListRequest) (*polyopv1alpha1.ListResponse, error) {
	m, err := s.mapping(req.GetKind())
	if err != nil {
		return nil, err
	}
	var opts []client.ListOption
	namespace := ""
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		namespace = req.GetNamespace()
		if namespace != "" {
			opts = append(opts, client.InNamespace(namespace))
		}
	}
	if err := s.allowRead("list", m, namespace, ""); err != nil {
		return nil, err
	}
	if req.GetLabelSelector() != "" {
		sel, err := labels.Parse(req.GetLabelSelector())
		if err != nil {
			return nil, invalid("label_selector: %v", err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	if req.GetFieldSelector() != "" {
		sel, err := fields.ParseSelector(req.GetFieldSelector())
		if err != nil {
			return nil, invalid("field_selector: %v", err)
		}
		opts = append(opts, client.MatchingFieldsSelector{Selector: sel})
	}
	// A continue token comes from the API server and only it can honour it.
	reader, source, err := s.reader(m, namespace, req.GetOptions().GetUncached() || req.GetContinueToken() != "")
	if err != nil {
		return nil, err
	}
	if source == polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER {
		if req.GetLimit() > 0 {
			opts = append(opts, client.Limit(req.GetLimit()))
		}
		if req.GetContinueToken() != "" {
			opts = append(opts, client.Continue(req.GetContinueToken()))
		}
	}

	list := listTarget(m.GroupVersionKind, source)
	if source == polyopv1alpha1.ReadSource_READ_SOURCE_CACHE {
		opts = append(opts, client.UnsafeDisableDeepCopy)
	}
	if err := reader.List(ctx, list, opts...); err != nil {
		var apiStatus apierrors.APIStatus
		if !errors.As(err, &apiStatus) && source == polyopv1alpha1.ReadSource_READ_SOURCE_CACHE && req.GetFieldSelector() != "" {
			return nil, invalid("%s", cacheFieldSelectorError(m.GroupVersionKind.Kind, req.GetFieldSelector(), s.indexList(m.GroupVersionKind), err))
		}
		return nil, toStatus(err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &polyopv1alpha1.ListResponse{
		Items:           make([][]byte, 0, len(items)),
		ContinueToken:   list.GetContinue(),
		ResourceVersion: list.GetResourceVersion(),
		Source:          source,
	}
	for _, item := range items {
		setKindIfMissing(item, m.GroupVersionKind)
		raw, err := json.Marshal(item)
		if err != nil {
			return nil, toStatus(err)
		}
		resp.Items = append(resp.Items, raw)
	}
	return resp, nil
}

// setKindIfMissing gives obj its kind when it came without one, as typed
// objects and the items of a built-in kind's list do.
func setKindIfMissing(obj runtime.Object, gvk schema.GroupVersionKind) {
	if k := obj.GetObjectKind(); k.GroupVersionKind().Kind == "" {
		k.SetGroupVersionKind(gvk)
	}
}

// readTarget is what a Get of kind gvk reads into: the cache holds
// object.Objects, and its own objects are read without a copy, as nothing
// here modifies them; the API server is read as unstructured content.
func readTarget(gvk schema.GroupVersionKind, source polyopv1alpha1.ReadSource) (client.Object, []client.GetOption) {
	if source == polyopv1alpha1.ReadSource_READ_SOURCE_CACHE {
		return object.New(gvk), []client.GetOption{client.UnsafeDisableDeepCopy}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// listTarget is what a List of kind gvk reads into (see readTarget).
func listTarget(gvk schema.GroupVersionKind, source polyopv1alpha1.ReadSource) client.ObjectList {
	if source == polyopv1alpha1.ReadSource_READ_SOURCE_CACHE {
		return object.NewList(gvk)
	}
	u := &unstructured.UnstructuredList{}
	u.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return u
}

// reader picks the cache when it holds the kind in namespace and the caller
// did not ask for the API server, and says which it picked. A kind the
// sidecar declared for cached reads is read from the API server only when
// asked (see Options.DeclaredKinds).
//
// A sharded kind (Options.ShardedKinds) is always read from the API server:
// the cache holds only the replica's share of it.
func (s *Server) reader(m *meta.RESTMapping, namespace string, uncached bool) (client.Reader, polyopv1alpha1.ReadSource, error) {
	if s.opts.ShardedKinds[m.GroupVersionKind] {
		return s.clients.APIReader, polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER, nil
	}
	if !uncached && s.cached(m.GroupVersionKind, namespace) {
		return s.clients.Cache, polyopv1alpha1.ReadSource_READ_SOURCE_CACHE, nil
	}
	if !uncached && s.opts.DeclaredKinds[m.GroupVersionKind] {
		return nil, 0, s.refuseUncached(m.GroupVersionKind, namespace)
	}
	return s.clients.APIReader, polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER, nil
}

// indexList names the indexes of gvk, for an error.
func (s *Server) indexList(gvk schema.GroupVersionKind) string {
	names := s.opts.Indexes[gvk]
	if len(names) == 0 {
		return "none on " + gvk.Kind
	}
	return strings.Join(names, ", ")
}

// objectKey validates the key of one object of the mapped kind: a name, and a
// namespace exactly when the kind is namespaced (a namespace given for a
// cluster-scoped kind is ignored, as client-go does).
func objectKey(m *meta.RESTMapping, k *polyopv1alpha1.ObjectKey) (client.ObjectKey, error) {
	if k.GetName() == "" {
		return client.ObjectKey{}, invalid("key.name is required")
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return client.ObjectKey{Name: k.GetName()}, nil
	}
	if k.GetNamespace() == "" {
		return client.ObjectKey{}, invalid("key.namespace is required: %s is namespaced", m.GroupVersionKind.Kind)
	}
	return client.ObjectKey{Namespace: k.GetNamespace(), Name: k.GetName()}, nil
}

// apiServerSelectableFields are the fields the API server selects every kind
// by. Beyond them it selects a built-in kind only by the fields that kind
// registers (a Pod's spec.nodeName, say) and a custom resource only by its
// CRD's selectableFields, and refuses any other field selector.
var apiServerSelectableFields = []string{"metadata.name", "metadata.namespace"}

// cacheFieldSelectorError says why the host's cache could not answer a List of
// kind by selector, and the remedy that works: for metadata.name and
// metadata.namespace, reading uncached; for another field, an index on it, as
// the API server selects by that field only if the kind registers it.
func cacheFieldSelectorError(kind, selector, indexes string, err error) string {
	msg := fmt.Sprintf("the host's cache cannot select %s by the field selector %q: it selects only by exact values (=, ==) of the indexes it keeps (%s): %v", kind, selector, indexes, err)
	var others []string
	if sel, parseErr := fields.ParseSelector(selector); parseErr == nil {
		for _, r := range sel.Requirements() {
			if !slices.Contains(apiServerSelectableFields, r.Field) && !slices.Contains(others, r.Field) {
				others = append(others, r.Field)
			}
		}
	}
	if len(others) == 0 {
		return msg + "; set uncached to ask the API server, which selects every kind by metadata.name and metadata.namespace"
	}
	return msg + fmt.Sprintf("; to select by %s, declare an index of that name on %s in the sidecar (an IndexDescription in its description), so that the host's cache keeps one. "+
		"Setting uncached helps only if %s registers the field for field selectors: the API server selects by metadata.name, metadata.namespace "+
		"and the fields the kind registers (a built-in kind's own, such as a Pod's spec.nodeName; a custom resource's selectableFields), and refuses any other",
		strings.Join(others, ", "), kind, kind)
}
