package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// TestAReconcilerListsByACustomIndexInASidecarAsInAManager runs an ordinary
// controller-runtime reconciler that indexes Jobs by their controller with a
// Go func (as kubebuilder's CronJob tutorial does) and lists them with
// client.MatchingFields, once in a controller-runtime manager and once in a
// sidecar behind the host; in both, each parent's annotation counts the Jobs
// it controls, and follows as Jobs come.
func TestAReconcilerListsByACustomIndexInASidecarAsInAManager(t *testing.T) {
	t.Parallel()
	inManager, inSidecar := newFixture(t), newFixture(t)
	inManager.start("manager", indexBin, "--standalone", "--kubeconfig", env.Kubeconfig, "--namespace", inManager.ns)
	inSidecar.startSidecar(indexBin)
	inSidecar.startHost()
	ctx := context.Background()

	for _, f := range []*fixture{inManager, inSidecar} {
		parents := map[string]*corev1.ConfigMap{}
		for _, name := range []string{"one", "two"} {
			p := configMap(f.ns, name, nil)
			p.Labels = map[string]string{"conformance.polyop.dev/jobs-parent": "yes"}
			if err := k8s.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			parents[name] = p
		}
		for i, parent := range []string{"one", "one", "two"} {
			if err := k8s.Create(ctx, ownedJob(f.ns, fmt.Sprintf("job-%d", i), parents[parent])); err != nil {
				t.Fatal(err)
			}
		}
	}
	counts := func(f *fixture, want map[string]string) func() (bool, string) {
		return func() (bool, string) {
			got := map[string]string{}
			for name := range want {
				var p corev1.ConfigMap
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &p); err != nil {
					return false, err.Error()
				}
				got[name] = p.Annotations["conformance.polyop.dev/jobs"]
			}
			return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(got)
		}
	}
	for _, f := range []*fixture{inManager, inSidecar} {
		testenv.Eventually(t, 2*time.Minute, f.ns+": each parent counts its Jobs", counts(f, map[string]string{"one": "2", "two": "1"}))
	}
	// A Job comes: its parent's count follows, from the index.
	for _, f := range []*fixture{inManager, inSidecar} {
		var two corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "two"}, &two); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Create(ctx, ownedJob(f.ns, "job-3", &two)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []*fixture{inManager, inSidecar} {
		testenv.Eventually(t, 2*time.Minute, f.ns+": the counts follow a new Job", counts(f, map[string]string{"one": "2", "two": "2"}))
	}
}

// ownedJob is a Job named name in ns that parent controls.
func ownedJob(ns, name string, parent *corev1.ConfigMap) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: parent.Name, UID: parent.UID, Controller: new(true),
		}}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "work", Image: "busybox"}},
		}}},
	}
}
