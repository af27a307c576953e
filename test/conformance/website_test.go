package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	websitev1 "github.com/polyop/polyop/examples/go/website/api/v1"
	"github.com/polyop/polyop/internal/testenv"
)

const contentHashAnnotation = "examples.polyop.dev/content-hash"

// TestWebsiteExample runs the declarative Website example behind the host:
// its desired children are applied and owned, a change to the ConfigMap it
// watches by a field path rolls them, and a child no longer desired is
// pruned.
func TestWebsiteExample(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startSidecar(websiteBin)
	f.startHost()
	ctx := context.Background()
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: f.ns, Name: name} }

	if err := k8s.Create(ctx, configMap(f.ns, "hello-content", map[string]string{"index.html": "<h1>one</h1>"})); err != nil {
		t.Fatal(err)
	}
	site := &websitev1.Website{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "hello"},
		Spec:       websitev1.WebsiteSpec{ConfigMapName: "hello-content", Replicas: new(int32(2))},
	}
	if err := k8s.Create(ctx, site); err != nil {
		t.Fatal(err)
	}

	// The children appear, owned by the Website.
	var d appsv1.Deployment
	testenv.Eventually(t, 2*time.Minute, "the children exist", func() (bool, string) {
		for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Service{}} {
			name := "hello"
			if _, ok := obj.(*corev1.ConfigMap); ok {
				name = "hello-published"
			}
			if err := k8s.Get(ctx, key(name), obj); err != nil {
				return false, err.Error()
			}
		}
		if err := k8s.Get(ctx, key("hello"), &d); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if err := k8s.Get(ctx, key("hello"), site); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{&d, &corev1.Service{}, &corev1.ConfigMap{}} {
		name := "hello"
		if _, ok := obj.(*corev1.ConfigMap); ok {
			name = "hello-published"
		}
		if err := k8s.Get(ctx, key(name), obj); err != nil {
			t.Fatal(err)
		}
		owner := metav1.GetControllerOf(obj)
		if owner == nil || owner.Kind != "Website" || owner.UID != site.UID {
			t.Errorf("%T %s has controller %+v, want the Website", obj, name, owner)
		}
	}
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d", *d.Spec.Replicas)
	}
	firstHash := d.Spec.Template.Annotations[contentHashAnnotation]
	testenv.Eventually(t, time.Minute, "the status reports the content", func() (bool, string) {
		if err := k8s.Get(ctx, key("hello"), site); err != nil {
			return false, err.Error()
		}
		return site.Status.ContentHash == firstHash && site.Status.URL != "", fmt.Sprintf("%+v", site.Status)
	})

	// envtest runs no pods: play the deployment controller and report the pods
	// available. The Website sees it in the observed children the host sends.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 2}
	if err := k8s.Status().Update(ctx, &d); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the site is Ready from its observed Deployment", func() (bool, string) {
		if err := k8s.Get(ctx, key("hello"), site); err != nil {
			return false, err.Error()
		}
		ready := meta.FindStatusCondition(site.Status.Conditions, "Ready")
		return ready != nil && ready.Status == metav1.ConditionTrue && site.Status.AvailableReplicas == 2, fmt.Sprintf("%+v", site.Status)
	})

	// A change to the content ConfigMap, watched through spec.configMapName,
	// publishes it and rolls the pods.
	content := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, key("hello-content"), content); err != nil {
		t.Fatal(err)
	}
	content.Data["index.html"] = "<h1>two</h1>"
	if err := k8s.Update(ctx, content); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the new content is published and rolled out", func() (bool, string) {
		var published corev1.ConfigMap
		if err := k8s.Get(ctx, key("hello-published"), &published); err != nil {
			return false, err.Error()
		}
		if err := k8s.Get(ctx, key("hello"), &d); err != nil {
			return false, err.Error()
		}
		hash := d.Spec.Template.Annotations[contentHashAnnotation]
		return published.Data["index.html"] == "<h1>two</h1>" && hash != firstHash,
			fmt.Sprintf("published %q, hash %s", published.Data["index.html"], hash)
	})

	// No longer exposed: the Service is not desired, and the complete set of
	// children prunes it.
	// The controller writes the status meanwhile: retry a conflict.
	if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := k8s.Get(ctx, key("hello"), site); err != nil {
			return err
		}
		site.Spec.Expose = new(false)
		return k8s.Update(ctx, site)
	}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the Service is pruned", func() (bool, string) {
		err := k8s.Get(ctx, key("hello"), &corev1.Service{})
		return apierrors.IsNotFound(err), errString(err)
	})
	if err := k8s.Get(ctx, key("hello"), &d); err != nil {
		t.Errorf("pruning the Service took the Deployment too: %v", err)
	}
	testenv.Eventually(t, time.Minute, "the status drops the URL", func() (bool, string) {
		if err := k8s.Get(ctx, key("hello"), site); err != nil {
			return false, err.Error()
		}
		return site.Status.URL == "", fmt.Sprintf("%+v", site.Status)
	})
}
