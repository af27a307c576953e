package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memcachedv1 "github.com/polyop/polyop/examples/go/memcached/api/v1"
	"github.com/polyop/polyop/internal/testenv"
)

// memcachedState is what the Memcached reconciler leaves in a namespace, with
// everything that differs between any two runs (names of namespaces, UIDs,
// resource versions, times, field managers) left out.
type memcachedState struct {
	Exists     bool
	Finalizers []string
	Conditions []stateCondition
	Deployment *stateDeployment
	Events     []string
}

type stateCondition struct {
	Type, Status, Reason, Message string
}

type stateDeployment struct {
	Replicas   int32
	Selector   map[string]string
	Template   corev1.PodTemplateSpec
	Owners     []metav1.OwnerReference
	Generation int64
}

// hostReconcileFailed is the reason of the event the host records on an
// object whose reconcile failed.
const hostReconcileFailed = "ReconcileFailed"

// memcachedStateOf reads the state of the Memcached "cache" in ns.
func memcachedStateOf(t *testing.T, ns string) memcachedState {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: ns, Name: "cache"}
	var s memcachedState

	var m memcachedv1.Memcached
	switch err := k8s.Get(ctx, key, &m); {
	case err == nil:
		s.Exists = true
		s.Finalizers = m.Finalizers
		for _, c := range m.Status.Conditions {
			s.Conditions = append(s.Conditions, stateCondition{c.Type, string(c.Status), c.Reason, c.Message})
		}
	case !apierrors.IsNotFound(err):
		t.Fatal(err)
	}

	var d appsv1.Deployment
	switch err := k8s.Get(ctx, key, &d); {
	case err == nil:
		sd := &stateDeployment{Replicas: *d.Spec.Replicas, Selector: d.Spec.Selector.MatchLabels, Template: d.Spec.Template, Generation: d.Generation}
		for _, o := range d.OwnerReferences {
			o.UID = ""
			sd.Owners = append(sd.Owners, o)
		}
		s.Deployment = sd
	case !apierrors.IsNotFound(err):
		t.Fatal(err)
	}

	var events corev1.EventList
	if err := k8s.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		// The host records a Warning ReconcileFailed event for every failed
		// reconcile, a manager none; a conflict on the status, retried,
		// happens in either run, at times.
		if e.Reason == hostReconcileFailed {
			continue
		}
		if e.InvolvedObject.Kind == "Memcached" && e.InvolvedObject.Name == "cache" {
			s.Events = append(s.Events, fmt.Sprintf("%s %s %s", e.Type, e.Reason, strings.ReplaceAll(e.Message, ns, "<namespace>")))
		}
	}
	slices.Sort(s.Events)
	s.Events = slices.Compact(s.Events)
	return s
}

func (s memcachedState) available() *stateCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == "Available" {
			return &s.Conditions[i]
		}
	}
	return nil
}

func (s memcachedState) String() string {
	data, _ := json.MarshalIndent(s, "", "  ")
	return string(data)
}

// TestMemcachedRunsTheSameInASidecarAsInAManager runs the Memcached example's
// reconciler, unchanged, twice: in a controller-runtime manager with
// controller-runtime's client (the example binary with --standalone), and in
// a sidecar behind the host with the SDK's client. Each run has a namespace
// of its own; the same steps happen in both, and after each step the state
// both runs leave must be the same.
func TestMemcachedRunsTheSameInASidecarAsInAManager(t *testing.T) {
	t.Parallel()
	inManager, inSidecar := newFixture(t), newFixture(t)
	inManager.start("manager", memcachedBin, "--standalone", "--kubeconfig", env.Kubeconfig, "--namespace", inManager.ns)
	inSidecar.startSidecar(memcachedBin)
	inSidecar.startHost()
	runs := map[string]*fixture{"manager": inManager, "sidecar": inSidecar}
	ctx := context.Background()

	// step does the same to both runs, waits until both reach a state that
	// satisfies done, and checks that the two states are the same.
	step := func(what string, do func(ns string), done func(s memcachedState) bool) {
		t.Helper()
		for _, f := range runs {
			do(f.ns)
		}
		states := map[string]memcachedState{}
		for name, f := range runs {
			testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("%s: the %s run is done", what, name), func() (bool, string) {
				s := memcachedStateOf(t, f.ns)
				states[name] = s
				return done(s), s.String()
			})
		}
		// Both may still be finishing (an event recorded in the background,
		// a last update): wait until they agree, and say where they do not.
		testenv.Eventually(t, 3*time.Minute, what+": both runs leave the same state", func() (bool, string) {
			for name, f := range runs {
				states[name] = memcachedStateOf(t, f.ns)
			}
			got, want := states["sidecar"].String(), states["manager"].String()
			return got == want, fmt.Sprintf("the sidecar run left\n%s\nthe manager run left\n%s", got, want)
		})
		t.Logf("%s: both runs left\n%s", what, states["manager"])
	}

	step("creating a Memcached of size 2", func(ns string) {
		m := &memcachedv1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}, Spec: memcachedv1.MemcachedSpec{Size: 2}}
		if err := k8s.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}, func(s memcachedState) bool {
		c := s.available()
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "with 2 replicas") && s.Deployment != nil
	})

	step("resizing it to 3", func(ns string) {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"size":3}}`))
		if err := k8s.Patch(ctx, &memcachedv1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}}, patch); err != nil {
			t.Fatal(err)
		}
	}, func(s memcachedState) bool {
		c := s.available()
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "with 3 replicas") && s.Deployment != nil && s.Deployment.Replicas == 3
	})

	step("deleting it", func(ns string) {
		if err := k8s.Delete(ctx, &memcachedv1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}}); err != nil {
			t.Fatal(err)
		}
	}, func(s memcachedState) bool {
		// envtest has no garbage collector: the Deployment stays, owned by
		// the Memcached that is gone.
		return !s.Exists && len(s.Events) > 0
	})

	final := memcachedStateOf(t, inSidecar.ns)
	if len(final.Events) != 1 || !strings.HasPrefix(final.Events[0], "Warning Deleting Custom Resource cache is being deleted from the namespace <namespace>") {
		t.Errorf("events = %q, want the finalizer's", final.Events)
	}
	if d := final.Deployment; d == nil || len(d.Owners) != 1 || d.Owners[0].Kind != "Memcached" || d.Owners[0].Controller == nil || !*d.Owners[0].Controller {
		t.Errorf("the deployment's owners = %+v", final.Deployment)
	}
}
