package host

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/polyop/polyop/internal/controller"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/index"
	"github.com/polyop/polyop/internal/object"
)

// addIndexes registers the indexes the sidecar declares with mgr's cache, so
// that a List with the field selector "<name>=<value>" is answered from it.
// Setup must have registered the controllers' own indexes: a declared index
// that takes one's name on the same kind is refused here.
func addIndexes(mgr ctrl.Manager, res *description.Resolved) error {
	log := ctrl.Log.WithName("index")
	for _, ix := range res.Indexes {
		for _, c := range res.Controllers {
			for _, w := range c.Watches {
				if c.GVK == ix.GVK && len(w.FieldPath) > 0 && controller.FieldIndex(w.FieldPath) == ix.Name {
					return fmt.Errorf("index %q on %s: controller %q keeps an index of that name for its field_path watch of %s; choose another name",
						ix.Name, description.GVKString(ix.GVK), c.Name, description.GVKString(w.GVK))
				}
			}
		}
		fn := index.IndexerFunc(description.GVKString(ix.GVK), ix.Name, ix.Expression, log)
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), object.New(ix.GVK), ix.Name, fn); err != nil {
			return fmt.Errorf("index %q on %s (%s): %w",
				ix.Name, description.GVKString(ix.GVK), ix.Source, err)
		}
		log.Info("Indexing", "kind", description.GVKString(ix.GVK), "index", ix.Name, "by", ix.Source)
	}
	return nil
}

// declaredKinds are the kinds declared for cached reads or indexes that no
// controller reconciles, owns or watches, sorted: their informers start with
// the others, and the host is ready once they have synced.
func declaredKinds(res *description.Resolved) []schema.GroupVersionKind {
	watched := res.WatchedKinds()
	var out []schema.GroupVersionKind
	for gvk := range res.Declared {
		if !slices.Contains(watched, gvk) {
			out = append(out, gvk)
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// indexNames are the names of the indexes each kind's Lists may select by:
// the declared ones, and index.OwnerUID on every owned kind.
func indexNames(res *description.Resolved) map[schema.GroupVersionKind][]string {
	out := map[schema.GroupVersionKind][]string{}
	for _, c := range res.Controllers {
		for _, o := range c.Owns {
			if !slices.Contains(out[o.GVK], index.OwnerUID) {
				out[o.GVK] = append(out[o.GVK], index.OwnerUID)
			}
		}
	}
	for _, ix := range res.Indexes {
		out[ix.GVK] = append(out[ix.GVK], ix.Name)
	}
	return out
}
