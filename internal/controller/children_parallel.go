package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultMaxConcurrentChildWrites is how many of one reconcile's child
// writes (applies, or deletes of pruned children) the host has in flight at
// once, unless configured otherwise: enough to hide most of the API server's
// round trip for an answer of a few children, while a controller with
// max_concurrent_reconciles workers has at most that many times as many
// writes in flight.
const DefaultMaxConcurrentChildWrites = 4

// writeTier orders the writes of one answer: every child of a lower tier is
// written before any of a higher one, and the children of one tier
// concurrently. Namespaces and CustomResourceDefinitions come first, since
// other objects may live in, or be of a kind served by, one of them; every
// other child is independent of its siblings as far as the API server is
// concerned (a Deployment may name a ServiceAccount that does not exist yet).
func writeTier(gvk schema.GroupVersionKind) int {
	switch gvk.GroupKind() {
	case schema.GroupKind{Kind: "Namespace"}, schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return 0
	}
	return 1
}

// byTier calls write with the indexes of the items in each tier, lowest tier
// first, each tier's in their order in the list; tier(i) is item i's tier.
func byTier(items []int, tier func(i int) int, write func(items []int)) {
	var first, rest []int
	for _, i := range items {
		if tier(i) == 0 {
			first = append(first, i)
		} else {
			rest = append(rest, i)
		}
	}
	if len(first) > 0 {
		write(first)
	}
	if len(rest) > 0 {
		write(rest)
	}
}

// inParallel calls fn(i) for every i in [0, n), at most limit at a time (one
// at a time for a limit below 2), and returns once every call has returned.
// fn must write only what belongs to its i. A panic in a call is raised
// again in the caller, once every call has returned, so that
// controller-runtime's recovery of a panicking reconcile still sees it.
func inParallel(n, limit int, fn func(i int)) {
	if limit < 2 || n < 2 {
		for i := range n {
			fn(i)
		}
		return
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		panicked any
	)
	slots := make(chan struct{}, limit)
	for i := range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					mu.Lock()
					if panicked == nil {
						panicked = p
					}
					mu.Unlock()
				}
				<-slots
			}()
			fn(i)
		})
	}
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
}
