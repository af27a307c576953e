package ring_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/polyop/polyop/internal/sharding/ring"
	"github.com/polyop/polyop/internal/testenv"
)

// The API server's sharded list (feature gate ShardedListAndWatch) returns a
// member exactly the objects the ring gives it, and each object to one member.
func TestTheAPIServerListsEachMemberExactlyItsShare(t *testing.T) {
	env, err := testenv.StartWith(testenv.Options{FeatureGates: []string{"ShardedListAndWatch"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	const n = 300
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r := ring.New([]string{"polyop-0", "polyop-1", "polyop-2"}, 0)
	seen := map[string]string{}
	for _, m := range r.Members() {
		list, err := cs.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{ShardSelector: r.ShardSelector(m)})
		if err != nil {
			t.Fatalf("listing %s's share: %v", m, err)
		}
		for _, cm := range list.Items {
			if owner := r.OwnerOf(cm.UID); owner != m {
				t.Errorf("the API server lists ConfigMap %s (UID %s) in %s's share, the ring gives it to %s", cm.Name, cm.UID, m, owner)
			}
			if other, ok := seen[cm.Name]; ok {
				t.Errorf("ConfigMap %s is listed for %s and %s", cm.Name, other, m)
			}
			seen[cm.Name] = m
		}
	}
	if len(seen) != n {
		t.Errorf("the members' shares list %d of the %d ConfigMaps", len(seen), n)
	}
}
