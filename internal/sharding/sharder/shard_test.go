package sharder

import (
	"context"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/sharding"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/testenv"
)

// shardFixture is member "me"'s reconciler over one object in a fake API
// server, counting the inner reconciles.
type shardFixture struct {
	c        client.Client
	rec      reconcile.Reconciler
	inFlight *InFlight
	inner    atomic.Int32
	req      reconcile.Request
}

func newShardFixture(t *testing.T, labels map[string]string, deleting bool) *shardFixture {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "object", Labels: maps.Clone(labels)}}
	if deleting {
		cm.Finalizers = []string{"polyop.dev/test"}
		cm.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	f := &shardFixture{inFlight: NewInFlight(), req: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cm)}}
	f.c = fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(cm).Build()
	shard, err := NewShard("ring", "me")
	if err != nil {
		t.Fatal(err)
	}
	f.rec, err = shard.Reconciler(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		f.inner.Add(1)
		return reconcile.Result{}, nil
	}), ReconcilerOptions{Reader: f.c, Client: f.c, NewObject: func() client.Object { return &corev1.ConfigMap{} }, InFlight: f.inFlight})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *shardFixture) labels(t *testing.T) map[string]string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := f.c.Get(context.Background(), f.req.NamespacedName, &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Labels
}

func TestTheShardReconcilesItsOwnObjectsAndHandsOffDrainedOnes(t *testing.T) {
	shard, drain := sharding.ShardLabel("ring"), sharding.DrainLabel("ring")
	for name, tc := range map[string]struct {
		labels    map[string]string
		deleting  bool
		reconcile bool
		want      map[string]string
	}{
		"if the object is labelled with the member, then it is reconciled": {
			labels: map[string]string{shard: "me"}, reconcile: true, want: map[string]string{shard: "me"},
		},
		"if the object is labelled with another member, then it is not reconciled": {
			labels: map[string]string{shard: "other"}, want: map[string]string{shard: "other"},
		},
		"if the object is draining, then it is not reconciled and both labels go": {
			labels: map[string]string{shard: "me", drain: "true", "app": "x"}, want: map[string]string{"app": "x"},
		},
		"if the object is draining and being deleted, then it is reconciled and keeps its labels": {
			labels: map[string]string{shard: "me", drain: "true"}, deleting: true, reconcile: true, want: map[string]string{shard: "me", drain: "true"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newShardFixture(t, tc.labels, tc.deleting)
			if _, err := f.rec.Reconcile(context.Background(), f.req); err != nil {
				t.Fatal(err)
			}
			if got := f.inner.Load() == 1; got != tc.reconcile {
				t.Errorf("reconciled: %v, want %v", got, tc.reconcile)
			}
			if got := f.labels(t); !maps.Equal(got, tc.want) {
				t.Errorf("labels %v, want %v", got, tc.want)
			}
		})
	}
}

func TestADrainedObjectIsHandedOffOnlyAfterTheReconcileInFlightEnds(t *testing.T) {
	f := newShardFixture(t, map[string]string{sharding.ShardLabel("ring"): "me", sharding.DrainLabel("ring"): "true"}, false)
	// Another controller of the replica has a reconcile of the object in flight.
	f.inFlight.Begin(f.req.NamespacedName)
	released := make(chan error, 1)
	go func() {
		_, err := f.rec.Reconcile(context.Background(), f.req)
		released <- err
	}()
	testenv.Eventually(t, time.Minute, "the drain holding the object", func() (bool, string) {
		if f.inFlight.Begin(f.req.NamespacedName) {
			f.inFlight.End(f.req.NamespacedName)
			return false, "Begin still accepts it"
		}
		return true, ""
	})
	if got := f.labels(t); got[sharding.ShardLabel("ring")] != "me" {
		t.Fatalf("the object was handed off with a reconcile in flight: labels %v", got)
	}
	f.inFlight.End(f.req.NamespacedName)
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if got := f.labels(t); len(got) != 0 {
		t.Errorf("labels %v after the handoff, want none", got)
	}
	if f.inner.Load() != 0 {
		t.Error("a draining object was reconciled")
	}
}
