// Package cacheversions carries a call's cache versions
// (ReconcileRequest.cache_versions) from the sidecar server that received
// the call to the client's local copies, through the handler's context.
package cacheversions

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime/schema"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

type key struct{}

// With returns ctx carrying versions, the cache versions of the call ctx
// serves; ctx itself when there are none.
func With(ctx context.Context, versions []*polyopv1alpha1.CacheVersion) context.Context {
	if len(versions) == 0 {
		return ctx
	}
	m := make(map[schema.GroupVersionKind]uint64, len(versions))
	for _, v := range versions {
		rv, err := strconv.ParseUint(v.GetResourceVersion(), 10, 64)
		if err != nil {
			continue // not one the host issues: nothing to wait for
		}
		k := v.GetKind()
		gvk := schema.GroupVersionKind{Group: k.GetGroup(), Version: k.GetVersion(), Kind: k.GetKind()}
		m[gvk] = max(m[gvk], rv)
	}
	return context.WithValue(ctx, key{}, m)
}

// For is the resource version the call ctx serves must read gvk at or
// after, and whether it names one.
func For(ctx context.Context, gvk schema.GroupVersionKind) (uint64, bool) {
	m, _ := ctx.Value(key{}).(map[schema.GroupVersionKind]uint64)
	rv, ok := m[gvk]
	return rv, ok
}
