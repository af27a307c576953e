package host

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fixedMappings is a meta.RESTMapper that answers RESTMapping for the kinds
// the host caches from a table filled once, at start, and asks its inner
// mapper everything else. controller-runtime's cache asks the mapper whether
// a kind is namespaced on every Get and List when it watches a set of
// namespaces, so every reconcile asked it several times; the dynamic mapper
// answers through layers of mappers that allocate about a kilobyte a time.
// The host's informers are built for these kinds' mappings at start and
// keep them for the process's life: the table says the same.
type fixedMappings struct {
	meta.RESTMapper
	mappings map[schema.GroupVersionKind]*meta.RESTMapping
}

// withFixedMappings returns inner, answering RESTMapping for kinds (and for
// their lists' kinds, which the cache asks about on every List) from the
// mappings inner gives now. A kind inner cannot map is left to it.
func withFixedMappings(inner meta.RESTMapper, kinds []schema.GroupVersionKind) meta.RESTMapper {
	m := &fixedMappings{RESTMapper: inner, mappings: make(map[schema.GroupVersionKind]*meta.RESTMapping, len(kinds))}
	for _, gvk := range kinds {
		// The cache asks for a List by the list's kind.
		for _, k := range []schema.GroupVersionKind{gvk, gvk.GroupVersion().WithKind(gvk.Kind + "List")} {
			if mapping, err := inner.RESTMapping(k.GroupKind(), k.Version); err == nil {
				m.mappings[k] = mapping
			}
		}
	}
	return m
}

// RESTMapping implements meta.RESTMapper.
func (m *fixedMappings) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) == 1 {
		if mapping, ok := m.mappings[gk.WithVersion(versions[0])]; ok {
			// A copy: a caller may change what it is given.
			out := *mapping
			return &out, nil
		}
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}
