package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/index"
)

// OwnerIndex is the cache index every owned kind gets: the UID of an object's
// controller owner. Observed children and the children to prune are found
// through it, never by scanning; sidecars list by it too (index.OwnerUID).
const OwnerIndex = index.OwnerUID

// ownerIndexName is the name under which controller-runtime's cache looks up
// the index of a List with the field selector OwnerIndex=<uid>. It and
// allNamespaces follow controller-runtime's cache (pkg/cache/internal); the
// end-to-end tests of observed and pruned children fail if they drift.
const ownerIndexName = "field:" + OwnerIndex

// allNamespaces is the namespace part of the index key that controller-runtime's
// cache looks up for a List across all namespaces.
const allNamespaces = "__all_namespaces"

// ownerIndexFunc is OwnerIndex as the cache's informers keep it: under the
// name and with the keys ("<namespace>/<uid>") that cache.IndexField would
// use, so that a List with client.MatchingFields finds the children, but
// without the second, all-namespaces key IndexField gives every namespaced
// object: the host lists a namespaced owner's children in its namespace, and
// one key per child costs half the memory. The all-namespaces key is kept for
// children of cluster-scoped owners (kinds in clusterScoped), which are
// listed across namespaces.
func ownerIndexFunc(clusterScoped map[schema.GroupKind]bool) toolscache.IndexFunc {
	return func(raw any) ([]string, error) {
		obj, ok := raw.(client.Object)
		if !ok {
			return nil, nil
		}
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil {
			return nil, nil
		}
		ns := obj.GetNamespace()
		if ns == "" {
			return []string{allNamespaces + "/" + string(ref.UID)}, nil
		}
		keys := []string{ns + "/" + string(ref.UID)}
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && clusterScoped[gv.WithKind(ref.Kind).GroupKind()] {
			keys = append(keys, allNamespaces+"/"+string(ref.UID))
		}
		return keys, nil
	}
}
