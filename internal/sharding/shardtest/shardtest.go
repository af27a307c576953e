// Package shardtest holds what the sharding modes' tests share: a detector
// of objects reconciled by two replicas at once, the objects' count and
// their creation, and the fixture of a test's ring (its namespace, replicas,
// the owners and shares of its objects, and the waits on them).
package shardtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ObjectCount is how many objects each test spreads over the ring: 300 by
// default, for a test that stays quick on a loaded machine;
// POLYOP_SHARDING_TEST_OBJECTS=3000 runs the full size.
func ObjectCount(t testing.TB) int {
	if s := os.Getenv("POLYOP_SHARDING_TEST_OBJECTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("POLYOP_SHARDING_TEST_OBJECTS=%q is not a positive number", s)
		}
		return n
	}
	return 300
}

// Detector is the replicas' shared view of their reconciles: it records who
// reconciled what, and every time two replicas had the same object in
// flight at once.
type Detector struct {
	// requeue is how soon each reconcile asks for the next: every object is
	// reconciled again and again, so that a ring change meets reconciles in
	// flight.
	requeue    time.Duration
	mu         sync.Mutex
	inFlight   map[types.NamespacedName]string
	overlaps   []string
	reconciled map[types.NamespacedName][]string // members, in order
	holds      map[hold]*held
}

// hold names a member's reconciles of an object that Hold keeps in flight.
type hold struct {
	member string
	key    types.NamespacedName
}

type held struct {
	inFlight bool
	release  chan struct{}
}

// NewDetector returns a Detector whose reconcilers ask to reconcile each
// object again after requeue.
func NewDetector(requeue time.Duration) *Detector {
	return &Detector{requeue: requeue, inFlight: map[types.NamespacedName]string{}, reconciled: map[types.NamespacedName][]string{}, holds: map[hold]*held{}}
}

// Hold keeps member's next reconcile of key in flight until release is
// called (once or more); Held tells when it is.
func (d *Detector) Hold(member string, key types.NamespacedName) (release func()) {
	h := &held{release: make(chan struct{})}
	d.mu.Lock()
	d.holds[hold{member, key}] = h
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			delete(d.holds, hold{member, key})
			close(h.release)
		})
	}
}

// Held reports whether a reconcile of key that Hold keeps is in flight in
// member.
func (d *Detector) Held(member string, key types.NamespacedName) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.holds[hold{member, key}]
	return h != nil && h.inFlight
}

// Reconciler is member's reconciler of the primary kind.
func (d *Detector) Reconciler(member string) reconcile.Reconciler {
	return reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		d.mu.Lock()
		if other, ok := d.inFlight[req.NamespacedName]; ok {
			d.overlaps = append(d.overlaps, fmt.Sprintf("%s reconciled by %s and %s at once", req.NamespacedName, other, member))
		} else {
			d.inFlight[req.NamespacedName] = member
		}
		d.reconciled[req.NamespacedName] = append(d.reconciled[req.NamespacedName], member)
		h := d.holds[hold{member, req.NamespacedName}]
		if h != nil {
			h.inFlight = true
		}
		d.mu.Unlock()
		// The reconcile's work: it keeps the object in flight for a while,
		// so that a reconcile of it elsewhere would meet it.
		time.Sleep(10 * time.Millisecond)
		if h != nil {
			<-h.release
		}
		d.mu.Lock()
		if d.inFlight[req.NamespacedName] == member {
			delete(d.inFlight, req.NamespacedName)
		}
		d.mu.Unlock()
		return reconcile.Result{RequeueAfter: d.requeue}, nil
	})
}

// Mark is how many reconciles of each object the detector has seen so far.
func (d *Detector) Mark() map[types.NamespacedName]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := make(map[types.NamespacedName]int, len(d.reconciled))
	for k, v := range d.reconciled {
		m[k] = len(v)
	}
	return m
}

// ReconciledSince reports whether member reconciled key after mark.
func (d *Detector) ReconciledSince(mark map[types.NamespacedName]int, key types.NamespacedName, member string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.reconciled[key][mark[key]:], member)
}

// CheckNoOverlap fails the test when any object was reconciled by two
// replicas at once.
func (d *Detector) CheckNoOverlap(t testing.TB) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.overlaps) > 0 {
		t.Fatalf("%d objects were reconciled by two replicas at once, e.g. %s", len(d.overlaps), d.overlaps[0])
	}
}

// CreateConfigMaps creates n ConfigMaps object-00000… in namespace ns, a few
// at a time, and returns their keys.
func CreateConfigMaps(t testing.TB, c client.Client, ns string, n int) []types.NamespacedName {
	ctx := context.Background()
	names := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range names {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("object-%05d", i)}}
				if err := c.Create(ctx, cm); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	keys := make([]types.NamespacedName, 0, n)
	for i := range n {
		keys = append(keys, types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("object-%05d", i)})
		select {
		case names <- i:
		case err := <-errs:
			t.Fatalf("creating the objects: %v", err)
		}
	}
	close(names)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("creating the objects: %v", err)
	}
	return keys
}
