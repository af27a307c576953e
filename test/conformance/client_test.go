package conformance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memcachedv1 "github.com/polyop/polyop/examples/go/memcached/api/v1"
	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/testenv"
	polyopclient "github.com/polyop/polyop/sdk/go/client"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// clientSidecar describes the sidecar of the client tests: it reconciles
// Memcacheds and owns Deployments, as the Memcached example does, and declares
// for cached reads the other kinds the tests write through the host
// (ConfigMaps, ServiceAccounts and Pods): the Cluster service writes only the
// kinds the description names.
var clientSidecar = &polyopv1alpha1.DescribeResponse{
	ProtocolVersion: polyopv1alpha1.ProtocolVersion_PROTOCOL_VERSION_V1ALPHA1,
	Name:            "client-conformance",
	Controllers: []*polyopv1alpha1.ControllerDescription{{
		Name:    "memcached",
		ForKind: &polyopv1alpha1.GroupVersionKind{Group: "examples.polyop.dev", Version: "v1", Kind: "Memcached"},
		Owns:    []*polyopv1alpha1.OwnedKind{{Kind: &polyopv1alpha1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}}},
	}},
	CachedKinds: []*polyopv1alpha1.CachedKind{
		{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}},
		{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}},
		{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Pod"}},
	},
}

// hostWithClient starts the host, with hostArgs, and a sidecar that
// describes itself as clientSidecar (so that the host caches Memcacheds,
// Deployments, ConfigMaps, ServiceAccounts and Pods in the fixture's
// namespace), and returns the SDK's client of its Cluster service.
func hostWithClient(t *testing.T, hostArgs ...string) (*fixture, *polyopclient.Client) {
	t.Helper()
	f := newFixture(t)
	srv, _ := fakesidecar.ServeOn(t, strings.TrimPrefix(f.sidecarAddress(), "unix://"), &fakesidecar.Fake{
		OnDescribe: fakesidecar.Answer(func(*polyopv1alpha1.DescribeRequest) *polyopv1alpha1.DescribeResponse { return clientSidecar }),
		OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
			return &polyopv1alpha1.ReconcileResponse{}
		}),
	})
	t.Cleanup(srv.Stop)
	f.startHost(hostArgs...)
	f.waitForSocket(f.clusterAddress())
	c := f.client()
	// The host serves once its cache has synced; until then, calls may fail.
	testenv.Eventually(t, 2*time.Minute, "the Cluster service answers", func() (bool, string) {
		err := c.List(context.Background(), &appsv1.DeploymentList{}, client.InNamespace(f.ns))
		return err == nil, errString(err)
	})
	return f, c
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

// TestAPIErrorsReachTheClientWithTheirType makes the API server refuse
// requests in each of the usual ways, through the host, and checks that the
// SDK's client returns the error controller-runtime's client would.
func TestAPIErrorsReachTheClientWithTheirType(t *testing.T) {
	t.Parallel()
	// A namespace being deleted refuses new objects with Forbidden; envtest
	// has no namespace controller, so it stays that way. The host watches it
	// too, so that the API server, not the host, refuses the write there.
	terminating := newFixture(t)
	f, c := hostWithClient(t, "--namespace", terminating.ns)
	ctx := context.Background()
	if err := c.Create(ctx, configMap(f.ns, "taken", nil)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, configMap(terminating.ns, "keep", nil)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: terminating.ns}}); err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		call  func() error
		is    func(error) bool
		check func(t *testing.T, err error)
	}{
		"if a cached object does not exist, then the error is NotFound": {
			call: func() error {
				return c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "missing"}, &appsv1.Deployment{})
			},
			is: apierrors.IsNotFound,
		},
		"if an uncached object does not exist, then the error is NotFound": {
			call: func() error { return c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "missing"}, &corev1.Service{}) },
			is:   apierrors.IsNotFound,
		},
		"if the object exists already, then the error is AlreadyExists": {
			call: func() error { return c.Create(ctx, configMap(f.ns, "taken", nil)) },
			is:   apierrors.IsAlreadyExists,
		},
		"if the resource version is stale, then the error is Conflict": {
			call: func() error {
				cm := configMap(f.ns, "taken", map[string]string{"a": "b"})
				cm.ResourceVersion = "1"
				return c.Update(ctx, cm)
			},
			is: apierrors.IsConflict,
		},
		"if the object is invalid, then the error is Invalid with the API server's causes": {
			call: func() error {
				return c.Create(ctx, &memcachedv1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "tiny"}, Spec: memcachedv1.MemcachedSpec{Size: 0}})
			},
			is: apierrors.IsInvalid,
			check: func(t *testing.T, err error) {
				var se *apierrors.StatusError
				if !errors.As(err, &se) || se.ErrStatus.Details == nil {
					t.Fatalf("error = %#v", err)
				}
				found := false
				for _, cause := range se.ErrStatus.Details.Causes {
					found = found || cause.Field == "spec.size"
				}
				if !found || se.ErrStatus.Details.Kind != "Memcached" || se.ErrStatus.Details.Name != "tiny" {
					t.Errorf("details = %+v", se.ErrStatus.Details)
				}
			},
		},
		"if the namespace is being deleted, then the error is Forbidden": {
			call: func() error { return c.Create(ctx, configMap(terminating.ns, "late", nil)) },
			is:   apierrors.IsForbidden,
			check: func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), "terminated") {
					t.Errorf("error = %v, want the API server's refusal of a terminating namespace", err)
				}
			},
		},
		"if the namespace is one the host does not watch, then the host's error is Forbidden": {
			call: func() error { return c.Create(ctx, configMap("kube-system", f.ns, nil)) },
			is:   apierrors.IsForbidden,
			check: func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), `not in "kube-system"`) {
					t.Errorf("error = %v, want the host's refusal naming the namespace", err)
				}
			},
		},
		"if a patch is malformed, then the error is BadRequest": {
			call: func() error {
				return c.Patch(ctx, configMap(f.ns, "taken", nil), client.RawPatch(types.JSONPatchType, []byte(`{"not":"a JSON patch"}`)))
			},
			is: apierrors.IsBadRequest,
		},
		"if the API server does not serve the kind, then the error is a no-match error": {
			call: func() error {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(schema.GroupVersionKind{Group: "examples.polyop.dev", Version: "v1", Kind: "Nothing"})
				return c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "x"}, u)
			},
			is: meta.IsNoMatchError,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !tc.is(err) {
				t.Fatalf("error = %#v", err)
			}
			if tc.check != nil {
				tc.check(t, err)
			}
		})
	}
}

// TestTheClientReadsAndWritesThroughTheHost exercises every kind of call
// against the real host and API server.
func TestTheClientReadsAndWritesThroughTheHost(t *testing.T) {
	t.Parallel()
	f, c := hostWithClient(t)
	ctx := context.Background()

	// Reads: the host caches Deployments and ConfigMaps in its namespace; an
	// uncached read goes to the API server.
	if err := c.Create(ctx, configMap(f.ns, "a", map[string]string{"k": "1"})); err != nil {
		t.Fatal(err)
	}
	var source polyopclient.Source
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "a"}, &cm, polyopclient.Uncached, polyopclient.RecordSource(&source)); err != nil {
		t.Fatal(err)
	}
	if cm.Data["k"] != "1" || source != polyopclient.SourceAPIServer {
		t.Errorf("ConfigMap %v read from %q, want the API server", cm.Data, source)
	}
	var deployments appsv1.DeploymentList
	if err := c.List(ctx, &deployments, client.InNamespace(f.ns), polyopclient.RecordSource(&source)); err != nil {
		t.Fatal(err)
	}
	if source != polyopclient.SourceCache {
		t.Errorf("Deployments read from %q, want the cache", source)
	}

	// Paging: a limited list from the API server hands out a continue token.
	for _, name := range []string{"b", "c"} {
		if err := c.Create(ctx, configMap(f.ns, name, map[string]string{"k": name})); err != nil {
			t.Fatal(err)
		}
	}
	var page corev1.ConfigMapList
	if err := c.List(ctx, &page, client.InNamespace(f.ns), client.Limit(2), polyopclient.Uncached); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 || page.Continue == "" {
		t.Fatalf("first page: %d items, continue %q", len(page.Items), page.Continue)
	}
	if err := c.List(ctx, &page, client.InNamespace(f.ns), client.Limit(2), client.Continue(page.Continue)); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) < 1 || page.Continue != "" {
		t.Errorf("last page: %d items, continue %q", len(page.Items), page.Continue)
	}

	// Patches of every type.
	base := cm.DeepCopy()
	cm.Data["merge"] = "yes"
	if err := c.Patch(ctx, &cm, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, &cm, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/data/json","value":"yes"}]`))); err != nil {
		t.Fatal(err)
	}
	base = cm.DeepCopy()
	cm.Data["strategic"] = "yes"
	if err := c.Patch(ctx, &cm, client.StrategicMergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, corev1ac.ConfigMap("a", f.ns).WithData(map[string]string{"applied": "yes"}), client.FieldOwner("applier"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "a"}, &cm, polyopclient.Uncached); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"merge", "json", "strategic", "applied"} {
		if cm.Data[k] != "yes" {
			t.Errorf("after the patches, data = %v: the %s patch is missing", cm.Data, k)
		}
	}
	managers := map[string]bool{}
	for _, m := range cm.ManagedFields {
		managers[m.Manager] = true
	}
	if !managers["applier"] || !managers["conformance"] {
		t.Errorf("field managers = %v, want the apply's and the client's default", managers)
	}

	// A dry run persists nothing.
	dry := configMap(f.ns, "dry", nil)
	if err := c.Create(ctx, dry, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "dry"}, &corev1.ConfigMap{}, polyopclient.Uncached); !apierrors.IsNotFound(err) {
		t.Errorf("a dry-run create was persisted: %v", err)
	}

	// Status and scale subresources, on a Deployment.
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	d.Status.ObservedGeneration = 1
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := c.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(&autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: d.ResourceVersion},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 4},
	})); err != nil {
		t.Fatal(err)
	}
	var got appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got, polyopclient.Uncached); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 4 || got.Status.ObservedGeneration != 1 {
		t.Errorf("after the scale and status updates: replicas %d, observed generation %d", *got.Spec.Replicas, got.Status.ObservedGeneration)
	}
	var scale autoscalingv1.Scale
	if err := c.SubResource("scale").Get(ctx, d, &scale); err != nil {
		t.Fatal(err)
	}
	if scale.Kind != "Scale" || scale.Name != "web" || scale.Spec.Replicas != 4 {
		t.Errorf("the scale subresource read: %+v", scale)
	}
	if err := c.SubResource("nonsense").Get(ctx, d, &scale); !apierrors.IsNotFound(err) {
		t.Errorf("reading a subresource the kind has not: %v, want NotFound", err)
	}

	// Creating subresources: the token of a service account, the eviction of
	// a pod (not scheduled, so the API server deletes it at once).
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "robot"}}
	if err := c.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	token := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))}}
	if err := c.SubResource("token").Create(ctx, sa, token); err != nil {
		t.Fatal(err)
	}
	if token.Status.Token == "" || token.Kind != "TokenRequest" {
		t.Errorf("the token request came back as %+v", token)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "evicted"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	other := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "another-pod"}}
	if err := c.SubResource("eviction").Create(ctx, pod, other); err == nil || !strings.Contains(err.Error(), `metadata.name is "another-pod"`) {
		t.Errorf("an eviction naming another pod: %v, want an error saying so", err)
	}
	if err := c.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}, polyopclient.Uncached); !apierrors.IsNotFound(err) {
		t.Errorf("the evicted pod: %v, want NotFound", err)
	}

	// Deletes: preconditions, and all of a selection.
	err := c.Delete(ctx, configMap(f.ns, "a", nil), client.Preconditions{UID: new(types.UID("not-its-uid"))})
	if !apierrors.IsConflict(err) {
		t.Errorf("a delete with a wrong UID precondition: %v, want Conflict", err)
	}
	if err := c.Delete(ctx, configMap(f.ns, "a", nil), client.PropagationPolicy(metav1.DeletePropagationForeground), client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	// A foreground deletion waits for the dependents, through a finalizer that
	// envtest, without a garbage collector, never removes.
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "a"}, &cm, polyopclient.Uncached); err != nil {
		t.Fatal(err)
	}
	if cm.DeletionTimestamp == nil || !slices.Contains(cm.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Errorf("after a foreground delete: deletion timestamp %v, finalizers %v", cm.DeletionTimestamp, cm.Finalizers)
	}
	if err := c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(f.ns), client.MatchingFields{"metadata.name": "b"}); err != nil {
		t.Fatal(err)
	}
	var left corev1.ConfigMapList
	if err := c.List(ctx, &left, client.InNamespace(f.ns), polyopclient.Uncached); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, item := range left.Items {
		if item.Name != "kube-root-ca.crt" && item.DeletionTimestamp == nil {
			names = append(names, item.Name)
		}
	}
	if strings.Join(names, ",") != "c" {
		t.Errorf("config maps left: %v, want only c", names)
	}

	// The REST mapper asks the host.
	namespaced, err := c.IsObjectNamespaced(&memcachedv1.Memcached{})
	if err != nil || !namespaced {
		t.Errorf("Memcached namespaced: %v, %v", namespaced, err)
	}
	mapping, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: "examples.polyop.dev", Kind: "Memcached"})
	if err != nil || mapping.Resource.Resource != "memcacheds" || mapping.GroupVersionKind.Version != "v1" {
		t.Errorf("mapping = %+v, %v", mapping, err)
	}

	// Events are recorded by the host on the object.
	if err := c.RecordEvent(ctx, d, corev1.EventTypeNormal, "Checked", "Checking", "checked by the conformance test"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the event is recorded", func() (bool, string) {
		var events corev1.EventList
		if err := k8s.List(ctx, &events, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Reason == "Checked" && e.InvolvedObject.Name == "web" && e.InvolvedObject.UID == d.UID {
				return true, ""
			}
		}
		return false, "no event"
	})
}
