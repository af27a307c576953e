package sharder

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/sharding"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/sharding/ring"
)

// uidOwnedBy returns a UID the ring assigns to member.
func uidOwnedBy(t *testing.T, r *ring.Ring, member string) types.UID {
	t.Helper()
	for i := range 10000 {
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		if r.OwnerOf(uid) == member {
			return uid
		}
	}
	t.Fatalf("no UID owned by %s", member)
	return ""
}

func TestTheSharderLabelsEachObjectForItsOwner(t *testing.T) {
	const ringName = "unit"
	shard, drain := sharding.ShardLabel(ringName), sharding.DrainLabel(ringName)
	r := ring.New([]string{"a", "b"}, 0)
	for name, tc := range map[string]struct {
		labels   map[string]string // before
		deleting bool
		want     map[string]string // after
		counted  counts
	}{
		"if an object has no shard label, then it is labelled with its owner": {
			labels: nil, want: map[string]string{shard: "a"}, counted: counts{assignments: 1},
		},
		"if an object is labelled with its owner, then nothing changes": {
			labels: map[string]string{shard: "a"}, want: map[string]string{shard: "a"},
		},
		"if an object is labelled with a live member that is not its owner, then it is drained": {
			labels: map[string]string{shard: "b"}, want: map[string]string{shard: "b", drain: "true"}, counted: counts{handoffs: 1},
		},
		"if an object is draining already, then nothing changes": {
			labels: map[string]string{shard: "b", drain: "true"}, want: map[string]string{shard: "b", drain: "true"},
		},
		"if an object is labelled with a dead member, then it moves to its owner": {
			labels: map[string]string{shard: "gone"}, want: map[string]string{shard: "a"}, counted: counts{moves: 1},
		},
		"if an object is draining from a dead member, then it moves to its owner, the drain dropped": {
			labels: map[string]string{shard: "gone", drain: "true"}, want: map[string]string{shard: "a"}, counted: counts{moves: 1},
		},
		"if an object is draining from its owner again, then the drain is withdrawn": {
			labels: map[string]string{shard: "a", drain: "true"}, want: map[string]string{shard: "a"},
		},
		"if an object being deleted is labelled with a live member that is not its owner, then it keeps its label": {
			labels: map[string]string{shard: "b"}, deleting: true, want: map[string]string{shard: "b"},
		},
		"if an object being deleted is labelled with a dead member, then it moves to its owner to be finalized": {
			labels: map[string]string{shard: "gone"}, deleting: true, want: map[string]string{shard: "a"}, counted: counts{moves: 1},
		},
		"if an object being deleted has no label, then it is labelled with its owner to be finalized": {
			labels: nil, deleting: true, want: map[string]string{shard: "a"}, counted: counts{assignments: 1},
		},
	} {
		t.Run(name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Namespace: "ns", Name: "object", UID: uidOwnedBy(t, r, "a"), Labels: maps.Clone(tc.labels),
			}}
			if tc.deleting {
				cm.Finalizers = []string{"polyop.dev/test"}
				cm.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(cm).Build()
			s := &sharder{ringName: ringName, gvk: configMapGVK, source: NewStaticSource(r), client: c, reader: c, shard: shard, drain: drain}
			before := countsOf(ringName)
			if _, err := s.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cm)}); err != nil {
				t.Fatal(err)
			}
			var got corev1.ConfigMap
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(cm), &got); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got.Labels, tc.want) && len(got.Labels)+len(tc.want) > 0 {
				t.Errorf("labels %v, want %v", got.Labels, tc.want)
			}
			after := countsOf(ringName)
			if d := (counts{after.handoffs - before.handoffs, after.moves - before.moves, after.assignments - before.assignments}); d != tc.counted {
				t.Errorf("counted %+v, want %+v", d, tc.counted)
			}
		})
	}
}

func TestTheSharderLooksAgainWhenTheObjectChangedSinceItsCacheSawIt(t *testing.T) {
	r := ring.New([]string{"a"}, 0)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "object", UID: "u"}}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(cm).Build()
	// A reader one version behind the API server.
	stale := &metav1.PartialObjectMetadata{}
	stale.SetGroupVersionKind(configMapGVK)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(cm), stale); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	reader := staticReader{stale}
	s := &sharder{ringName: "unit-stale", gvk: configMapGVK, source: NewStaticSource(r), client: c, reader: reader, shard: sharding.ShardLabel("unit-stale"), drain: sharding.DrainLabel("unit-stale")}
	res, err := s.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cm)})
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("Reconcile on a stale read returned %+v, %v; want a requeue after a moment and no error", res, err)
	}
	var got corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Labels) != 0 {
		t.Errorf("a patch against a stale version applied: labels %v", got.Labels)
	}
}

// staticReader reads one object, whatever the key.
type staticReader struct{ obj *metav1.PartialObjectMetadata }

func (r staticReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.obj.DeepCopyInto(obj.(*metav1.PartialObjectMetadata))
	return nil
}

func (staticReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }
