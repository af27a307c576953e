package sharder

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLabelsAreTheContractsNames(t *testing.T) {
	if got := ShardLabel("my-sidecar"); got != "shard.sharding.polyop.dev/my-sidecar" {
		t.Errorf("ShardLabel = %s", got)
	}
	if got := DrainLabel("my-sidecar"); got != "drain.sharding.polyop.dev/my-sidecar" {
		t.Errorf("DrainLabel = %s", got)
	}
}

func TestALongRingNameGivesValidAndDistinctLabels(t *testing.T) {
	long := strings.Repeat("a", 100)
	k1, k2 := ShardLabel(long+"-one"), ShardLabel(long+"-two")
	for _, k := range []string{k1, k2, DrainLabel(long)} {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("%s is not a valid label key: %v", k, errs)
		}
	}
	if k1 == k2 {
		t.Errorf("two long ring names share the label %s", k1)
	}
}

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
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{ShardLabel("ring"): "host-0", DrainLabel("ring"): "true"}}}
	got := ChildLabels("ring", parent)
	if len(got) != 1 || got[ShardLabel("ring")] != "host-0" {
		t.Errorf("ChildLabels = %v, want only the shard label host-0", got)
	}
	if got := ChildLabels("ring", &corev1.ConfigMap{}); got != nil {
		t.Errorf("ChildLabels of an unlabelled controller = %v, want none", got)
	}
}
