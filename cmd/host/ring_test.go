package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/sharding"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/polyop/polyop/internal/sharding/membership"
	"github.com/polyop/polyop/internal/sharding/ring"
)

// shardLease is a Lease of ringName held by holder, renewed at renewed for
// seconds, as a sharded host's Member writes it.
func shardLease(ringName, holder string, renewed time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: membership.LeaseName(ringName, holder), Labels: map[string]string{sharding.RingLabel: ringName}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			RenewTime:            &metav1.MicroTime{Time: renewed},
			LeaseDurationSeconds: ptr.To(seconds),
		},
	}
}

func TestRingPrintsTheLiveMembersAndHowObjectsAreAssigned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	suffix := time.Now().UnixNano()
	leaseNS, objectsNS := fmt.Sprintf("ring-leases-%d", suffix), fmt.Sprintf("ring-objects-%d", suffix)
	for _, ns := range []string{leaseNS, objectsNS} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	for _, l := range []*coordinationv1.Lease{
		shardLease("frigate", "host-a", now, 3600),
		shardLease("frigate", "host-b", now, 3600),
		shardLease("frigate", "host-c", now.Add(-time.Hour), 15), // expired
		shardLease("other", "host-x", now, 3600),                 // another ring's
	} {
		if _, err := cs.CoordinationV1().Leases(leaseNS).Create(ctx, l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// 40 ConfigMaps: 10 labelled with their owner, 5 with the other live
	// member, 5 with the dead one, 20 not labelled.
	r := ring.New([]string{"host-a", "host-b"}, 0)
	label := sharding.ShardLabel("frigate")
	owned, labelled := map[string]int{}, map[string]int{}
	for i := range 40 {
		cm, err := cs.CoreV1().ConfigMaps(objectsNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owner := r.OwnerOf(cm.UID)
		owned[owner]++
		shard := ""
		switch {
		case i < 10:
			shard = owner
		case i < 15:
			shard = map[string]string{"host-a": "host-b", "host-b": "host-a"}[owner]
		case i < 20:
			shard = "host-c"
		}
		if shard == "" {
			continue
		}
		labelled[shard]++
		cm.Labels = map[string]string{label: shard}
		if _, err := cs.CoreV1().ConfigMaps(objectsNS).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Objects elsewhere are not counted.
	if _, err := cs.CoreV1().ConfigMaps(leaseNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	code, out := run(t, nil, "ring", "--kubeconfig", env.Kubeconfig, "--ring", "frigate", "--namespace", leaseNS,
		"--kind", "v1/ConfigMap", "--objects-namespace", objectsNS)
	if code != 0 {
		t.Fatalf("host ring exited %d:\n%s", code, out)
	}
	if want := fmt.Sprintf("Ring frigate: 2 live members, from 3 Leases labelled sharding.polyop.dev/ring=frigate in namespace %s", leaseNS); !strings.Contains(out, want) {
		t.Errorf("the output does not say %q:\n%s", want, out)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "host-") {
			rows[f[0]] = f
		}
	}
	for _, m := range []string{"host-a", "host-b"} {
		f := rows[m]
		share := fmt.Sprintf("%.1f%%", 100*membership.Share(r, m))
		want := []string{m, membership.LeaseName("frigate", m), share, fmt.Sprint(owned[m]), fmt.Sprint(labelled[m])}
		if len(f) != 7 || f[0] != want[0] || f[1] != want[1] || f[4] != want[2] || f[5] != want[3] || f[6] != want[4] {
			t.Errorf("the row of %s is %q, want member, lease, share, owned and labelled %q:\n%s", m, f, want, out)
		}
	}
	if f := rows["host-c"]; len(f) < 5 || f[3] != "expired" || f[len(f)-2] != "0" || f[len(f)-1] != "5" {
		t.Errorf("the row of the expired member is %q, want it expired, owning 0 and labelled on 5:\n%s", f, out)
	}
	if _, ok := rows["host-x"]; ok {
		t.Errorf("another ring's member is listed:\n%s", out)
	}
	if want := fmt.Sprintf("ConfigMap in namespace %s: 40 objects; 20 unassigned (without the label shard.sharding.polyop.dev/frigate), 10 misassigned", objectsNS); !strings.Contains(out, want) {
		t.Errorf("the output does not say %q:\n%s", want, out)
	}

	code, out = run(t, nil, "ring", "--kubeconfig", env.Kubeconfig, "--ring", "frigate")
	if code != 0 || !strings.Contains(out, "Ring frigate: 0 live members, from 0 Leases") || !strings.Contains(out, "No member is live") {
		t.Errorf("a ring without Leases in the kubeconfig's namespace: exited %d:\n%s", code, out)
	}
	code, out = run(t, nil, "ring", "--kubeconfig", env.Kubeconfig)
	if code != 1 || !strings.Contains(out, "--ring is required") {
		t.Errorf("without --ring: exited %d:\n%s", code, out)
	}
	code, out = run(t, nil, "ring", "--kubeconfig", env.Kubeconfig, "--ring", "frigate", "--kind", "ConfigMap")
	if code != 1 || !strings.Contains(out, `--kind "ConfigMap" is not group/version/Kind`) {
		t.Errorf("a kind without its version: exited %d:\n%s", code, out)
	}
}
