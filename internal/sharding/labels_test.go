package sharding

import (
	"strings"
	"testing"

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
