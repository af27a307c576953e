package sharder

import (
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/sharding"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAMemberThatCannotBeALabelValueIsRefused(t *testing.T) {
	if _, err := NewShard("ring", strings.Repeat("x", 64)); err == nil {
		t.Error("NewShard accepted a 64-character member name")
	}
	s, err := NewShard("ring", "host-0")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Selector().String(); got != "shard.sharding.polyop.dev/ring=host-0" {
		t.Errorf("Selector = %s", got)
	}
}

func TestAChildCarriesItsControllersShard(t *testing.T) {
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{sharding.ShardLabel("ring"): "host-0", sharding.DrainLabel("ring"): "true"}}}
	got := ChildLabels("ring", parent)
	if len(got) != 1 || got[sharding.ShardLabel("ring")] != "host-0" {
		t.Errorf("ChildLabels = %v, want only the shard label host-0", got)
	}
	if got := ChildLabels("ring", &corev1.ConfigMap{}); got != nil {
		t.Errorf("ChildLabels of an unlabelled controller = %v, want none", got)
	}
}
