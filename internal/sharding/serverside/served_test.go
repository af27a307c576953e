package serverside_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/polyop/polyop/internal/sharding/serverside"
	"github.com/polyop/polyop/internal/sharding/sharder"
	"github.com/polyop/polyop/internal/testenv"
)

func listConfigMaps(cs kubernetes.Interface, ns string) func(context.Context, metav1.ListOptions) error {
	return func(ctx context.Context, o metav1.ListOptions) error {
		_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, o)
		return err
	}
}

// An API server with the ShardedListAndWatch feature gate refuses an
// invalid shard selector; one without it ignores the field. So the probe
// tells them apart even when no object exists.
func TestCheckServedTellsWhetherTheAPIServerServesShardSelectors(t *testing.T) {
	on := kubernetes.NewForConfigOrDie(env.Config)
	if err := serverside.CheckServed(t.Context(), listConfigMaps(on, "default")); err != nil {
		t.Errorf("with the feature gate on: %v, want nil", err)
	}

	offEnv, err := testenv.StartWith(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := offEnv.Stop(); err != nil {
			t.Error(err)
		}
	})
	off := kubernetes.NewForConfigOrDie(offEnv.Config)
	if err := serverside.CheckServed(t.Context(), listConfigMaps(off, "default")); !errors.Is(err, serverside.ErrNotServed) {
		t.Errorf("with the feature gate off: %v, want ErrNotServed", err)
	}
}

// A replica that owns nothing (not a live member) lists nothing.
func TestAShareOfNothingListsNothing(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "share-of-nothing"}}
	if err := k8s.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"x", "y", "z"} {
		if _, err := cs.CoreV1().ConfigMaps(ns.Name).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	share := serverside.NewShare(sharder.NewStaticSource(nil), "a")
	list, err := cs.CoreV1().ConfigMaps(ns.Name).List(t.Context(), metav1.ListOptions{ShardSelector: share.Selector()})
	if err != nil {
		t.Fatalf("listing with the selector of nothing %q: %v", share.Selector(), err)
	}
	if len(list.Items) != 0 {
		t.Errorf("the selector of nothing lists %d ConfigMaps", len(list.Items))
	}
}
