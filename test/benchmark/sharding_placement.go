package benchmark

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/sharding"
	"github.com/polyop/polyop/internal/sharding/ring"
	benchv1alpha1 "github.com/polyop/polyop/test/benchmark/api/v1alpha1"
)

// placements follows the shard labels of a run's Widgets and ConfigMaps
// through an informer cache of their metadata in the harness: a watch, which
// costs the API server far less than listing thousands of objects again and
// again while a handoff is timed.
type placements struct {
	cache        cache.Cache
	ns           string
	shard, drain string // the ring's label keys
}

// watchPlacements starts the cache of the namespace's Widgets and
// ConfigMaps; it stops with ctx.
func watchPlacements(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, ns string) (*placements, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{ns: {}},
	})
	if err != nil {
		return nil, fmt.Errorf("the harness's cache of the shard labels: %w", err)
	}
	p := &placements{cache: c, ns: ns, shard: sharding.ShardLabel(shardRing), drain: sharding.DrainLabel(shardRing)}
	go func() { _ = c.Start(ctx) }()
	// Start the informers now, so that the first check does not wait for
	// the lists.
	for _, l := range []*metav1.PartialObjectMetadataList{p.widgets(), p.configMaps()} {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("the harness's cache of the shard labels: %w", err)
		}
	}
	return p, nil
}

func (p *placements) widgets() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(benchv1alpha1.GroupVersion.WithKind("WidgetList"))
	return l
}

func (p *placements) configMaps() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	return l
}

// placement is where a ring's objects are, by their shard labels.
type placement struct {
	// Widgets counts the Widgets, and Misplaced those not labelled with
	// their ring owner, or draining.
	Widgets, Misplaced int
	// Stale counts the Widgets whose ConfigMap is missing or carries another
	// shard label than the Widget's ring owner: not yet reconciled by it.
	Stale int
	// Labelled counts the Widgets, and LabelledConfigMaps the ConfigMaps,
	// labelled with each member.
	Labelled, LabelledConfigMaps map[string]int
}

// done reports whether all n Widgets, and their ConfigMaps, are with their
// ring owner.
func (p placement) done(n int) bool { return p.Widgets == n && p.Misplaced == 0 && p.Stale == 0 }

func (p placement) String() string {
	return fmt.Sprintf("%d Widgets, %d not labelled with their ring owner or draining, %d whose ConfigMap is not labelled with it; Widgets labelled %v",
		p.Widgets, p.Misplaced, p.Stale, p.Labelled)
}

// check compares every Widget's and ConfigMap's shard label with the
// Widget's owner in the ring of members.
func (p *placements) check(ctx context.Context, members []string) (placement, error) {
	r := ring.New(members, ring.DefaultVirtualNodes)
	widgets, cms := p.widgets(), p.configMaps()
	// The harness only reads them: no copies of thousands of objects.
	if err := p.cache.List(ctx, widgets, client.InNamespace(p.ns), client.UnsafeDisableDeepCopy); err != nil {
		return placement{}, err
	}
	if err := p.cache.List(ctx, cms, client.InNamespace(p.ns), client.UnsafeDisableDeepCopy); err != nil {
		return placement{}, err
	}
	out := placement{Widgets: len(widgets.Items), Labelled: map[string]int{}, LabelledConfigMaps: map[string]int{}}
	cmLabel := make(map[string]string, len(cms.Items))
	for i := range cms.Items {
		owner := cms.Items[i].Labels[p.shard]
		cmLabel[cms.Items[i].Name] = owner
		out.LabelledConfigMaps[owner]++
	}
	for i := range widgets.Items {
		w := &widgets.Items[i]
		owner, label := r.OwnerOf(w.UID), w.Labels[p.shard]
		out.Labelled[label]++
		if label != owner || w.Labels[p.drain] != "" {
			out.Misplaced++
		}
		// The ConfigMap is named after its Widget (widget.ConfigMap).
		if got, ok := cmLabel[w.Name]; !ok || got != owner {
			out.Stale++
		}
	}
	return out, nil
}

// moved counts the Widgets whose owner differs between the rings of two
// sets of members.
func (p *placements) moved(ctx context.Context, before, after []string) (int, error) {
	widgets := p.widgets()
	if err := p.cache.List(ctx, widgets, client.InNamespace(p.ns), client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	a, b := ring.New(before, ring.DefaultVirtualNodes), ring.New(after, ring.DefaultVirtualNodes)
	n := 0
	for i := range widgets.Items {
		if a.OwnerOf(widgets.Items[i].UID) != b.OwnerOf(widgets.Items[i].UID) {
			n++
		}
	}
	return n, nil
}
