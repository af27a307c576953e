package cluster

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/gen/go/polyop/v1alpha1"
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
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(m.GroupVersionKind)
	reader, source := s.reader(m, key.Namespace, req.GetUncached())
	if err := reader.Get(ctx, key, obj); err != nil {
		return nil, toStatus(err)
	}
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, toStatus(err)
	}
	return &polyopv1alpha1.GetResponse{Object: raw, Source: source}, nil
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
	reader, source := s.reader(m, namespace, req.GetUncached() || req.GetContinueToken() != "")
	if source == polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER {
		if req.GetLimit() > 0 {
			opts = append(opts, client.Limit(req.GetLimit()))
		}
		if req.GetContinueToken() != "" {
			opts = append(opts, client.Continue(req.GetContinueToken()))
		}
	}

	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(m.GroupVersionKind.GroupVersion().WithKind(m.GroupVersionKind.Kind + "List"))
	if err := reader.List(ctx, list, opts...); err != nil {
		var apiStatus apierrors.APIStatus
		if !errors.As(err, &apiStatus) && source == polyopv1alpha1.ReadSource_READ_SOURCE_CACHE && req.GetFieldSelector() != "" {
			return nil, invalid("the host's cache cannot select %s by the field selector %q (it selects only by exact values of the fields it indexes): %v; set uncached to ask the API server",
				m.GroupVersionKind.Kind, req.GetFieldSelector(), err)
		}
		return nil, toStatus(err)
	}
	resp := &polyopv1alpha1.ListResponse{
		Items:           make([][]byte, 0, len(list.Items)),
		ContinueToken:   list.GetContinue(),
		ResourceVersion: list.GetResourceVersion(),
		Source:          source,
	}
	for i := range list.Items {
		item := &list.Items[i]
		if item.GetKind() == "" {
			item.SetGroupVersionKind(m.GroupVersionKind)
		}
		raw, err := item.MarshalJSON()
		if err != nil {
			return nil, toStatus(err)
		}
		resp.Items = append(resp.Items, raw)
	}
	return resp, nil
}

// reader picks the cache when it holds the kind in namespace and the caller
// did not ask for the API server, and says which it picked.
func (s *Server) reader(m *meta.RESTMapping, namespace string, uncached bool) (client.Reader, polyopv1alpha1.ReadSource) {
	if !uncached && s.cached(m.GroupVersionKind, namespace) {
		return s.clients.Cache, polyopv1alpha1.ReadSource_READ_SOURCE_CACHE
	}
	return s.clients.APIReader, polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER
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
