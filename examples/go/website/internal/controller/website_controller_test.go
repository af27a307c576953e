package controller_test

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/polyop/polyop/examples/go/website/api/v1"
	"github.com/polyop/polyop/examples/go/website/internal/controller"
	"github.com/polyop/polyop/sdk/go/conditions"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

// newHarness returns a harness for the Website controller, whose client is a
// fake holding objs.
func newHarness(t *testing.T, objs ...client.Object) *sidecartest.Harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	srv, err := sidecar.New(sidecar.Options{Name: "test", Scheme: scheme, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.WebsiteReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()}
	if err := r.SetupWithServer(srv); err != nil {
		t.Fatal(err)
	}
	return sidecartest.New(t, srv)
}

func content(index string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello-content"},
		Data:       map[string]string{"index.html": index},
	}
}

func website(opts ...func(*v1.Website)) *v1.Website {
	w := &v1.Website{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello", Generation: 2},
		Spec:       v1.WebsiteSpec{ConfigMapName: "hello-content", Replicas: new(int32(2))},
	}
	for _, opt := range opts {
		opt(w)
	}
	return w
}

func notExposed(w *v1.Website) { w.Spec.Expose = new(false) }

// observed is the Deployment the host would send back, rolled out with the
// content hash and available pods.
func observed(hash string, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello", Generation: 1},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{controller.ContentHashAnnotation: hash},
		}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, AvailableReplicas: available},
	}
}

func childNames(res *sidecartest.Response) string {
	var names []string
	for _, u := range res.DesiredChildren() {
		names = append(names, u.GetKind()+"/"+u.GetName())
	}
	return strings.Join(names, ",")
}

func TestReconcileDeclaresTheChildren(t *testing.T) {
	t.Parallel()
	h := newHarness(t, content("<h1>Hello</h1>"))
	res := h.Reconcile(t.Context(), controller.ControllerName, website())
	if res.Err != nil {
		t.Fatal(res.Err.Message)
	}
	if got := childNames(res); got != "ConfigMap/hello-published,Deployment/hello,Service/hello" {
		t.Errorf("children = %s", got)
	}
	if !res.ChildrenComplete() {
		t.Error("the children are not declared complete: a Service no longer desired would stay")
	}

	var published corev1.ConfigMap
	res.DesiredChild("ConfigMap", "hello-published", &published)
	if published.Data["index.html"] != "<h1>Hello</h1>" {
		t.Errorf("published content = %v", published.Data)
	}
	var d appsv1.Deployment
	res.DesiredChild("Deployment", "hello", &d)
	hash := d.Spec.Template.Annotations[controller.ContentHashAnnotation]
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != controller.DefaultImage || hash == "" ||
		d.Spec.Template.Spec.Volumes[0].ConfigMap.Name != "hello-published" {
		t.Errorf("deployment = %+v", d.Spec)
	}
	if d.Namespace != "" || len(d.OwnerReferences) != 0 {
		t.Error("the deployment sets a namespace or owner: the host does that")
	}
	var svc corev1.Service
	res.DesiredChild("Service", "hello", &svc)
	if svc.Spec.Ports[0].Port != 80 || svc.Spec.Selector["app.kubernetes.io/instance"] != "hello" {
		t.Errorf("service = %+v", svc.Spec)
	}

	var got v1.Website
	res.Status(&got)
	if got.Status.ContentHash != hash || got.Status.URL != "http://hello.default.svc" || got.Status.ObservedGeneration != 2 {
		t.Errorf("status = %+v", got.Status)
	}
	if c := conditions.Get(got.Status.Conditions, conditions.Ready); c == nil || c.Reason != controller.ReasonProgressing {
		t.Errorf("Ready = %+v, want Progressing: no deployment is observed yet", c)
	}
	if len(res.Events) != 1 || res.Events[0].Reason != "Published" {
		t.Errorf("events = %+v", res.Events)
	}
}

func TestTheContentHashFollowsTheContent(t *testing.T) {
	t.Parallel()
	hashOf := func(index string) string {
		res := newHarness(t, content(index)).Reconcile(t.Context(), controller.ControllerName, website())
		var d appsv1.Deployment
		res.DesiredChild("Deployment", "hello", &d)
		return d.Spec.Template.Annotations[controller.ContentHashAnnotation]
	}
	if a, b, c := hashOf("one"), hashOf("two"), hashOf("one"); a == b || a != c {
		t.Errorf("hashes %s, %s, %s: different content must roll the pods, the same must not", a, b, c)
	}
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	cm := content("<h1>Hello</h1>")
	hash := func() string {
		res := newHarness(t, cm).Reconcile(t.Context(), controller.ControllerName, website())
		var got v1.Website
		res.Status(&got)
		return got.Status.ContentHash
	}()
	tests := map[string]struct {
		objs         []client.Object
		website      *v1.Website
		observed     []client.Object
		wantChildren string
		wantComplete bool
		wantReady    metav1.ConditionStatus
		wantReason   string
		wantErr      string
	}{
		"if the deployment serves the content with every pod, then the site is Ready": {
			objs:         []client.Object{cm},
			website:      website(),
			observed:     []client.Object{observed(hash, 2)},
			wantChildren: "ConfigMap/hello-published,Deployment/hello,Service/hello",
			wantComplete: true,
			wantReady:    metav1.ConditionTrue,
			wantReason:   controller.ReasonAvailable,
		},
		"if the deployment still serves older content, then the site is Progressing": {
			objs:         []client.Object{cm},
			website:      website(),
			observed:     []client.Object{observed("0123456789abcdef", 2)},
			wantChildren: "ConfigMap/hello-published,Deployment/hello,Service/hello",
			wantComplete: true,
			wantReady:    metav1.ConditionFalse,
			wantReason:   controller.ReasonProgressing,
		},
		"if the site is not exposed, then no Service is desired and the set is complete, so it is pruned": {
			objs:         []client.Object{cm},
			website:      website(notExposed),
			wantChildren: "ConfigMap/hello-published,Deployment/hello",
			wantComplete: true,
			wantReady:    metav1.ConditionFalse,
			wantReason:   controller.ReasonProgressing,
		},
		"if the content ConfigMap is missing, then nothing is declared and nothing is pruned": {
			website:    website(),
			wantReady:  metav1.ConditionFalse,
			wantReason: controller.ReasonContentMissing,
		},
		"if the content is the published ConfigMap itself, then the spec is refused": {
			website:    website(func(w *v1.Website) { w.Spec.ConfigMapName = "hello-published" }),
			wantReady:  metav1.ConditionFalse,
			wantReason: controller.ReasonInvalidSpec,
			wantErr:    "invalid spec",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.objs...)
			res := h.Reconcile(t.Context(), controller.ControllerName, tc.website, h.WithObservedChildren(tc.observed...))
			switch {
			case tc.wantErr == "" && res.Err != nil:
				t.Fatalf("unexpected error %q", res.Err.Message)
			case tc.wantErr != "" && (res.Err == nil || !strings.Contains(res.Err.Message, tc.wantErr) || !res.Err.Terminal):
				t.Fatalf("error = %+v, want a terminal one containing %q", res.Err, tc.wantErr)
			}
			if got := childNames(res); got != tc.wantChildren {
				t.Errorf("children = %q, want %q", got, tc.wantChildren)
			}
			if res.ChildrenComplete() != tc.wantComplete {
				t.Errorf("complete = %v", res.ChildrenComplete())
			}
			var got v1.Website
			res.Status(&got)
			c := conditions.Get(got.Status.Conditions, conditions.Ready)
			if c == nil || c.Status != tc.wantReady || c.Reason != tc.wantReason {
				t.Errorf("Ready = %+v, want %s %s", c, tc.wantReady, tc.wantReason)
			}
			if tc.website.Spec.Expose != nil && got.Status.URL != "" {
				t.Errorf("a site not exposed has URL %q", got.Status.URL)
			}
		})
	}
}
