package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// resolveTimeout bounds each ResolveKind call: meta.RESTMapper's methods take
// no context.
const resolveTimeout = 30 * time.Second

// restMapper is a meta.RESTMapper backed by ClusterService.ResolveKind.
//
// The Cluster service maps kinds to resources, not resources to kinds, so
// KindFor, KindsFor, ResourceFor, ResourcesFor and ResourceSingularizer know
// only the kinds this mapper has resolved already; for others they answer
// with a NoResourceMatchError. Answers are cached for the life of the Client;
// a kind the API server does not serve is asked again every time, so that a
// CRD installed later is found.
type restMapper struct {
	client *Client

	mu         sync.RWMutex
	byKind     map[schema.GroupVersionKind]*meta.RESTMapping // also under an empty version, for the preferred one
	byResource map[schema.GroupVersionResource]*meta.RESTMapping
}

var _ meta.RESTMapper = (*restMapper)(nil)

func newRESTMapper(c *Client) *restMapper {
	return &restMapper{
		client:     c,
		byKind:     map[schema.GroupVersionKind]*meta.RESTMapping{},
		byResource: map[schema.GroupVersionResource]*meta.RESTMapping{},
	}
}

// RESTMapping returns the mapping of the kind gk at the first of versions the
// API server serves, or at its preferred version when versions is empty. A
// kind the API server does not serve is a *meta.NoKindMatchError
// (meta.IsNoMatchError).
func (m *restMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) == 0 {
		versions = []string{""}
	}
	for _, v := range versions {
		mapping, err := m.resolve(gk.WithVersion(v))
		if meta.IsNoMatchError(err) {
			continue
		}
		return mapping, err
	}
	return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: nonEmpty(versions)}
}

// RESTMappings returns the mappings of gk at each of versions the API server
// serves, or at its preferred version when versions is empty.
func (m *restMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	if len(versions) == 0 {
		versions = []string{""}
	}
	var out []*meta.RESTMapping
	for _, v := range versions {
		mapping, err := m.resolve(gk.WithVersion(v))
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, mapping)
	}
	if len(out) == 0 {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: nonEmpty(versions)}
	}
	return out, nil
}

// resolve returns the mapping of gvk, from the cache or from the host. An
// empty version asks for the preferred one.
func (m *restMapper) resolve(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m.mu.RLock()
	mapping, ok := m.byKind[gvk]
	m.mu.RUnlock()
	if ok {
		return mapping, nil
	}

	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	resp, err := m.client.cluster.ResolveKind(ctx, &polyopv1alpha1.ResolveKindRequest{Kind: gvkProto(gvk)}, m.client.callOpts...)
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: nonEmpty([]string{gvk.Version})}
		}
		return nil, wrapError(ctx, schema.GroupVersionKind{}, "resolving the kind "+gvk.String(), err)
	}
	k := resp.GetKind()
	resolved := schema.GroupVersionKind{Group: k.GetGroup(), Version: k.GetVersion(), Kind: k.GetKind()}
	if resolved.Kind == "" || resolved.Version == "" || resp.GetResource() == "" {
		return nil, fmt.Errorf("polyop client: resolving the kind %s: the host answered without a kind, version or resource: %v", gvk, resp)
	}
	scope := meta.RESTScopeRoot
	if resp.GetNamespaced() {
		scope = meta.RESTScopeNamespace
	}
	mapping = &meta.RESTMapping{
		Resource:         resolved.GroupVersion().WithResource(resp.GetResource()),
		GroupVersionKind: resolved,
		Scope:            scope,
	}
	m.mu.Lock()
	m.byKind[gvk] = mapping
	m.byKind[resolved] = mapping
	m.byResource[mapping.Resource] = mapping
	m.mu.Unlock()
	return mapping, nil
}

// find returns the resolved mappings that match a possibly partial resource:
// an empty group or version matches any.
func (m *restMapper) find(resource schema.GroupVersionResource) []*meta.RESTMapping {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*meta.RESTMapping
	name := strings.ToLower(resource.Resource)
	for gvr, mapping := range m.byResource {
		singular := strings.ToLower(mapping.GroupVersionKind.Kind)
		if (gvr.Resource != name && singular != name) ||
			(resource.Group != "" && gvr.Group != resource.Group) ||
			(resource.Version != "" && gvr.Version != resource.Version) {
			continue
		}
		out = append(out, mapping)
	}
	return out
}

// KindFor returns the kind of a resource this mapper has resolved already.
func (m *restMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	kinds, err := m.KindsFor(resource)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	if len(kinds) > 1 {
		return schema.GroupVersionKind{}, &meta.AmbiguousResourceError{PartialResource: resource, MatchingKinds: kinds}
	}
	return kinds[0], nil
}

// KindsFor returns the kinds of a resource this mapper has resolved already.
func (m *restMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	mappings := m.find(resource)
	if len(mappings) == 0 {
		return nil, &meta.NoResourceMatchError{PartialResource: resource}
	}
	out := make([]schema.GroupVersionKind, len(mappings))
	for i, mapping := range mappings {
		out[i] = mapping.GroupVersionKind
	}
	return out, nil
}

// ResourceFor completes a resource this mapper has resolved already.
func (m *restMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	resources, err := m.ResourcesFor(input)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	if len(resources) > 1 {
		return schema.GroupVersionResource{}, &meta.AmbiguousResourceError{PartialResource: input, MatchingResources: resources}
	}
	return resources[0], nil
}

// ResourcesFor completes a resource this mapper has resolved already.
func (m *restMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	mappings := m.find(input)
	if len(mappings) == 0 {
		return nil, &meta.NoResourceMatchError{PartialResource: input}
	}
	out := make([]schema.GroupVersionResource, len(mappings))
	for i, mapping := range mappings {
		out[i] = mapping.Resource
	}
	return out, nil
}

// ResourceSingularizer returns the singular of a resource this mapper has
// resolved already: its kind in lower case.
func (m *restMapper) ResourceSingularizer(resource string) (string, error) {
	mappings := m.find(schema.GroupVersionResource{Resource: resource})
	if len(mappings) == 0 {
		return "", &meta.NoResourceMatchError{PartialResource: schema.GroupVersionResource{Resource: resource}}
	}
	return strings.ToLower(mappings[0].GroupVersionKind.Kind), nil
}

func nonEmpty(versions []string) []string {
	var out []string
	for _, v := range versions {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}
