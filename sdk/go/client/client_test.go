package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/sdk/go/client"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/internal/sdktest"
)

var deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

func deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
}

func configMap(name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
		Data:       map[string]string{"key": name},
	}
}

func TestGetDecodesIntoTheCallersType(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t, deployment("web", 3))
	ctx := t.Context()
	key := ctrlclient.ObjectKey{Namespace: "default", Name: "web"}

	t.Run("typed", func(t *testing.T) {
		// Whatever the object held before is gone after the read.
		got := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"stale": "yes"}}}
		if err := c.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		if *got.Spec.Replicas != 3 || got.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" || got.ResourceVersion == "" {
			t.Errorf("got %+v", got)
		}
		if got.Annotations["stale"] != "" {
			t.Error("Get kept a field of the object it decoded into")
		}
		if got.APIVersion != "apps/v1" || got.Kind != "Deployment" {
			t.Errorf("type meta = %+v", got.TypeMeta)
		}
		req := last[*polyopv1alpha1.GetRequest](t, f)
		if k := req.GetKind(); k.GetGroup() != "apps" || k.GetVersion() != "v1" || k.GetKind() != "Deployment" {
			t.Errorf("request kind = %v", k)
		}
		if req.GetKey().GetNamespace() != "default" || req.GetKey().GetName() != "web" || req.GetOptions().GetUncached() {
			t.Errorf("request = %v", req)
		}
	})
	t.Run("unstructured", func(t *testing.T) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(deploymentGVK)
		if err := c.Get(ctx, key, u); err != nil {
			t.Fatal(err)
		}
		replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		if replicas != 3 || u.GetKind() != "Deployment" {
			t.Errorf("got %v", u.Object)
		}
	})
	t.Run("metadata only", func(t *testing.T) {
		p := &metav1.PartialObjectMetadata{}
		p.SetGroupVersionKind(deploymentGVK)
		if err := c.Get(ctx, key, p); err != nil {
			t.Fatal(err)
		}
		if p.Labels["app"] != "web" || p.Kind != "Deployment" {
			t.Errorf("got %+v", p)
		}
	})
	t.Run("a type not in the scheme", func(t *testing.T) {
		err := c.Get(ctx, key, &struct{ appsv1.Deployment }{})
		if err == nil || !strings.Contains(err.Error(), "no kind is registered") {
			t.Errorf("error = %v", err)
		}
	})
}

func TestReadOptions(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t, deployment("web", 1))
	ctx := t.Context()
	key := ctrlclient.ObjectKey{Namespace: "default", Name: "web"}

	var source client.Source
	if err := c.Get(ctx, key, &appsv1.Deployment{}, client.RecordSource(&source)); err != nil {
		t.Fatal(err)
	}
	if source != client.SourceCache {
		t.Errorf("source = %q, want the cache", source)
	}
	if err := c.Get(ctx, key, &appsv1.Deployment{}, client.Uncached, client.RecordSource(&source)); err != nil {
		t.Fatal(err)
	}
	if !last[*polyopv1alpha1.GetRequest](t, f).GetOptions().GetUncached() || source != client.SourceAPIServer {
		t.Errorf("an uncached Get was sent as %v and reported source %q", last[*polyopv1alpha1.GetRequest](t, f), source)
	}
	if err := c.List(ctx, &appsv1.DeploymentList{}, client.Uncached, client.RecordSource(&source)); err != nil {
		t.Fatal(err)
	}
	if !last[*polyopv1alpha1.ListRequest](t, f).GetOptions().GetUncached() || source != client.SourceAPIServer {
		t.Error("an uncached List was not sent as uncached")
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t,
		configMap("a", map[string]string{"tier": "web"}),
		configMap("b", map[string]string{"tier": "web"}),
		configMap("c", map[string]string{"tier": "db"}),
	)
	ctx := t.Context()

	tests := map[string]struct {
		list      ctrlclient.ObjectList
		opts      []ctrlclient.ListOption
		wantNames []string
		wantReq   *polyopv1alpha1.ListRequest
	}{
		"if a typed list is given, then its items are the item kind's objects": {
			list:      &corev1.ConfigMapList{},
			opts:      []ctrlclient.ListOption{ctrlclient.InNamespace("default")},
			wantNames: []string{"a", "b", "c"},
			wantReq:   &polyopv1alpha1.ListRequest{Namespace: "default"},
		},
		"if labels are selected, then the selector is sent in kubectl's syntax": {
			list:      &corev1.ConfigMapList{},
			opts:      []ctrlclient.ListOption{ctrlclient.MatchingLabels{"tier": "web"}},
			wantNames: []string{"a", "b"},
			wantReq:   &polyopv1alpha1.ListRequest{LabelSelector: "tier=web"},
		},
		"if fields, a limit and a continue token are given, then they are sent": {
			list:      &corev1.ConfigMapList{},
			opts:      []ctrlclient.ListOption{ctrlclient.MatchingFields{"metadata.name": "c"}, ctrlclient.Limit(2), ctrlclient.Continue("token")},
			wantNames: []string{"c"},
			wantReq:   &polyopv1alpha1.ListRequest{FieldSelector: "metadata.name=c", Limit: 2, ContinueToken: "token"},
		},
		"if the list is unstructured, then its kind names the items": {
			list: func() ctrlclient.ObjectList {
				ul := &unstructured.UnstructuredList{}
				ul.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"})
				return ul
			}(),
			opts:      []ctrlclient.ListOption{&ctrlclient.ListOptions{Namespace: "default"}},
			wantNames: []string{"a", "b", "c"},
			wantReq:   &polyopv1alpha1.ListRequest{Namespace: "default"},
		},
		"if the list is of metadata only, then the items carry their metadata": {
			list: func() ctrlclient.ObjectList {
				pl := &metav1.PartialObjectMetadataList{}
				pl.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
				return pl
			}(),
			opts:      []ctrlclient.ListOption{ctrlclient.HasLabels{"tier"}},
			wantNames: []string{"a", "b", "c"},
			wantReq:   &polyopv1alpha1.ListRequest{LabelSelector: "tier"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := c.List(ctx, tc.list, tc.opts...); err != nil {
				t.Fatal(err)
			}
			items, err := meta.ExtractList(tc.list)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, item := range items {
				m, _ := meta.Accessor(item)
				names = append(names, m.GetName())
			}
			if strings.Join(names, ",") != strings.Join(tc.wantNames, ",") {
				t.Errorf("names = %v, want %v", names, tc.wantNames)
			}
			req := last[*polyopv1alpha1.ListRequest](t, f)
			if k := req.GetKind(); k.GetGroup() != "" || k.GetVersion() != "v1" || k.GetKind() != "ConfigMap" {
				t.Errorf("kind = %v, want the item kind", k)
			}
			if req.GetNamespace() != tc.wantReq.GetNamespace() || req.GetLabelSelector() != tc.wantReq.GetLabelSelector() ||
				req.GetFieldSelector() != tc.wantReq.GetFieldSelector() || req.GetLimit() != tc.wantReq.GetLimit() ||
				req.GetContinueToken() != tc.wantReq.GetContinueToken() {
				t.Errorf("request = %v, want %v", req, tc.wantReq)
			}
		})
	}
}

func TestListCarriesTheListMetadata(t *testing.T) {
	t.Parallel()
	_, c := newFakeCluster(t, configMap("a", nil))
	list := &corev1.ConfigMapList{Items: []corev1.ConfigMap{{}, {}, {}, {}}}
	if err := c.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.ResourceVersion != "1000" || list.Items[0].Data["key"] != "a" {
		t.Errorf("list = %+v", list)
	}
}

func TestErrorsKeepTheirAPIType(t *testing.T) {
	t.Parallel()
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", field.ErrorList{
		field.Invalid(field.NewPath("spec", "replicas"), -1, "must be greater than or equal to 0"),
	})
	tests := map[string]struct {
		// inject is what the Cluster service answers; nil lets the fake store answer.
		inject error
		call   func(ctx context.Context, c *client.Client) error
		is     func(error) bool
		check  func(t *testing.T, err error)
	}{
		"if the object does not exist, then the error is NotFound": {
			call: func(ctx context.Context, c *client.Client) error {
				return c.Get(ctx, ctrlclient.ObjectKey{Namespace: "default", Name: "missing"}, &appsv1.Deployment{})
			},
			is: apierrors.IsNotFound,
			check: func(t *testing.T, err error) {
				if ctrlclient.IgnoreNotFound(err) != nil {
					t.Error("client.IgnoreNotFound kept the error")
				}
			},
		},
		"if the object exists already, then the error is AlreadyExists": {
			call: func(ctx context.Context, c *client.Client) error { return c.Create(ctx, deployment("web", 1)) },
			is:   apierrors.IsAlreadyExists,
		},
		"if the resource version is stale, then the error is Conflict": {
			call: func(ctx context.Context, c *client.Client) error {
				d := deployment("web", 1)
				d.ResourceVersion = "1"
				return c.Update(ctx, d)
			},
			is: apierrors.IsConflict,
		},
		"if the object is invalid, then the error is Invalid and keeps its causes": {
			inject: invalid,
			call:   func(ctx context.Context, c *client.Client) error { return c.Update(ctx, deployment("web", -1)) },
			is:     apierrors.IsInvalid,
			check: func(t *testing.T, err error) {
				var se *apierrors.StatusError
				if !errors.As(err, &se) || se.ErrStatus.Details == nil || len(se.ErrStatus.Details.Causes) != 1 {
					t.Fatalf("error = %#v", err)
				}
				cause := se.ErrStatus.Details.Causes[0]
				if cause.Field != "spec.replicas" || cause.Type != metav1.CauseTypeFieldValueInvalid {
					t.Errorf("cause = %+v", cause)
				}
				if se.ErrStatus.Details.Name != "web" || se.ErrStatus.Details.Kind != "Deployment" {
					t.Errorf("details = %+v", se.ErrStatus.Details)
				}
			},
		},
		"if the write is forbidden, then the error is Forbidden": {
			inject: apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("no RBAC rule")),
			call:   func(ctx context.Context, c *client.Client) error { return c.Delete(ctx, deployment("web", 1)) },
			is:     apierrors.IsForbidden,
			check: func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), "no RBAC rule") {
					t.Errorf("message = %q", err)
				}
			},
		},
		"if the host does not find the kind, then the error is a no-match error, as controller-runtime's": {
			inject: status.Error(codes.NotFound, `no matches for kind "Widget" in version "examples.polyop.dev/v1"`),
			call: func(ctx context.Context, c *client.Client) error {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(schema.GroupVersionKind{Group: "examples.polyop.dev", Version: "v1", Kind: "Widget"})
				return c.Get(ctx, ctrlclient.ObjectKey{Namespace: "default", Name: "w"}, u)
			},
			is: meta.IsNoMatchError,
			check: func(t *testing.T, err error) {
				if apierrors.IsNotFound(err) {
					t.Error("a kind the API server does not serve is not an object that is not found")
				}
			},
		},
		"if the host fails without an API error, then the error is wrapped and says what failed": {
			inject: status.Error(codes.Unavailable, "the API server is unreachable"),
			call: func(ctx context.Context, c *client.Client) error {
				return c.Get(ctx, ctrlclient.ObjectKey{Namespace: "default", Name: "web"}, &appsv1.Deployment{})
			},
			is: func(err error) bool {
				var se *apierrors.StatusError
				return !errors.As(err, &se) && status.Code(errors.Unwrap(err)) == codes.Unavailable
			},
			check: func(t *testing.T, err error) {
				want := "polyop client: getting apps/v1 Deployment default/web: rpc error: code = Unavailable desc = the API server is unreachable"
				if err.Error() != want {
					t.Errorf("message = %q, want %q", err, want)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, c := newFakeCluster(t, deployment("web", 1))
			if tc.inject != nil {
				if _, ok := tc.inject.(apierrors.APIStatus); ok {
					tc.inject = apiError(tc.inject)
				}
				f.failNext(tc.inject)
			}
			err := tc.call(t.Context(), c)
			if err == nil || !tc.is(err) {
				t.Fatalf("error = %#v", err)
			}
			if tc.check != nil {
				tc.check(t, err)
			}
		})
	}
}

func TestAnEndedContextIsReportedAsSuch(t *testing.T) {
	t.Parallel()
	_, c := newFakeCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	err := c.Get(ctx, ctrlclient.ObjectKey{Name: "x"}, &corev1.Namespace{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want one that is context.DeadlineExceeded", err)
	}
}

func TestCreateAndUpdate(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t)
	ctx := t.Context()

	d := deployment("web", 2)
	if err := c.Create(ctx, d, ctrlclient.FieldOwner("memcached")); err != nil {
		t.Fatal(err)
	}
	if d.ResourceVersion == "" || d.Kind != "Deployment" {
		t.Errorf("the created object was not decoded back: %+v", d.ObjectMeta)
	}
	req := last[*polyopv1alpha1.CreateRequest](t, f)
	if req.GetOptions().GetFieldManager() != "memcached" || req.GetOptions().GetDryRun() {
		t.Errorf("options = %v", req.GetOptions())
	}
	if k := req.GetKind(); k.GetGroup() != "apps" || k.GetVersion() != "v1" || k.GetKind() != "Deployment" ||
		req.GetKey().GetNamespace() != "default" || req.GetKey().GetName() != "web" {
		t.Errorf("create addressed %v %v, want apps/v1 Deployment default/web", req.GetKind(), req.GetKey())
	}
	var sent map[string]any
	if err := json.Unmarshal(req.GetObject(), &sent); err != nil {
		t.Fatal(err)
	}
	if sent["apiVersion"] != "apps/v1" || sent["kind"] != "Deployment" {
		t.Errorf("the object was sent as %v %v, want apiVersion and kind from the scheme", sent["apiVersion"], sent["kind"])
	}

	d.Spec.Replicas = new(int32(5))
	if err := c.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	if ureq := last[*polyopv1alpha1.UpdateRequest](t, f); ureq.GetKind().GetKind() != "Deployment" || ureq.GetKey().GetName() != "web" ||
		ureq.GetKey().GetNamespace() != "default" {
		t.Errorf("update addressed %v %v, want apps/v1 Deployment default/web", ureq.GetKind(), ureq.GetKey())
	}
	got := &appsv1.Deployment{}
	if err := c.Get(ctx, ctrlclient.ObjectKeyFromObject(d), got); err != nil || *got.Spec.Replicas != 5 {
		t.Errorf("after the update: %v, replicas %v", err, got.Spec.Replicas)
	}

	if err := c.Create(ctx, configMap("dry", nil), ctrlclient.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if !last[*polyopv1alpha1.CreateRequest](t, f).GetOptions().GetDryRun() {
		t.Error("DryRunAll was not sent")
	}
	if err := c.Get(ctx, ctrlclient.ObjectKey{Namespace: "default", Name: "dry"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("a dry-run create was persisted: %v", err)
	}
}

func TestDefaultFieldOwner(t *testing.T) {
	t.Parallel()
	f, _ := newFakeCluster(t)
	// A second client with a field owner of its own, on the same fake.
	c, err := client.New(client.Options{Conn: mustDial(t, f), FieldOwner: "website"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), configMap("a", nil)); err != nil {
		t.Fatal(err)
	}
	if got := last[*polyopv1alpha1.CreateRequest](t, f).GetOptions().GetFieldManager(); got != "website" {
		t.Errorf("field manager = %q, want the client's default", got)
	}
	if err := c.Create(t.Context(), configMap("b", nil), ctrlclient.FieldOwner("mine")); err != nil {
		t.Fatal(err)
	}
	if got := last[*polyopv1alpha1.CreateRequest](t, f).GetOptions().GetFieldManager(); got != "mine" {
		t.Errorf("field manager = %q, want the call's", got)
	}
}

func TestPatch(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		patch    func(d *appsv1.Deployment) ctrlclient.Patch
		opts     []ctrlclient.PatchOption
		wantType polyopv1alpha1.PatchType
		// wantPatch is a part of the patch the request must carry.
		wantPatch    string
		wantForce    bool
		wantReplicas int32
	}{
		"if the patch is MergeFrom, then a merge patch of the change is sent": {
			patch: func(d *appsv1.Deployment) ctrlclient.Patch {
				base := d.DeepCopy()
				d.Spec.Replicas = new(int32(4))
				return ctrlclient.MergeFrom(base)
			},
			wantType:     polyopv1alpha1.PatchType_PATCH_TYPE_MERGE,
			wantPatch:    `{"spec":{"replicas":4}}`,
			wantReplicas: 4,
		},
		"if the patch is a raw JSON patch, then it is sent as it is": {
			patch: func(*appsv1.Deployment) ctrlclient.Patch {
				return ctrlclient.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/replicas","value":6}]`))
			},
			wantType:     polyopv1alpha1.PatchType_PATCH_TYPE_JSON,
			wantPatch:    `"value":6`,
			wantReplicas: 6,
		},
		"if the patch is StrategicMergeFrom, then a strategic merge patch is sent": {
			patch: func(d *appsv1.Deployment) ctrlclient.Patch {
				base := d.DeepCopy()
				d.Spec.Replicas = new(int32(7))
				return ctrlclient.StrategicMergeFrom(base)
			},
			wantType:     polyopv1alpha1.PatchType_PATCH_TYPE_STRATEGIC_MERGE,
			wantPatch:    `"replicas":7`,
			wantReplicas: 7,
		},
		"if the patch is Apply, then the object is applied with its kind from the scheme, forced": {
			patch: func(d *appsv1.Deployment) ctrlclient.Patch {
				d.ManagedFields, d.ResourceVersion = nil, ""
				d.Spec.Replicas = new(int32(8))
				return ctrlclient.Apply //nolint:staticcheck // The deprecated patch is still what many reconcilers use.
			},
			opts:         []ctrlclient.PatchOption{ctrlclient.FieldOwner("memcached"), ctrlclient.ForceOwnership},
			wantType:     polyopv1alpha1.PatchType_PATCH_TYPE_APPLY,
			wantPatch:    `"apiVersion":"apps/v1"`,
			wantForce:    true,
			wantReplicas: 8,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, c := newFakeCluster(t, deployment("web", 1))
			ctx := t.Context()
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, ctrlclient.ObjectKey{Namespace: "default", Name: "web"}, d); err != nil {
				t.Fatal(err)
			}
			d.TypeMeta = metav1.TypeMeta{} // as controller-runtime's direct client leaves it
			if err := c.Patch(ctx, d, tc.patch(d), tc.opts...); err != nil {
				t.Fatal(err)
			}
			req := last[*polyopv1alpha1.PatchRequest](t, f)
			if req.GetType() != tc.wantType || req.GetOptions().GetForce() != tc.wantForce || !strings.Contains(string(req.GetPatch()), tc.wantPatch) {
				t.Errorf("request = %v %s, force %v", req.GetType(), req.GetPatch(), req.GetOptions().GetForce())
			}
			if req.GetKind().GetKind() != "Deployment" || req.GetKey().GetName() != "web" || req.GetSubresource() != "" {
				t.Errorf("request = %v", req)
			}
			if *d.Spec.Replicas != tc.wantReplicas {
				t.Errorf("the patched object has %d replicas, want %d", *d.Spec.Replicas, tc.wantReplicas)
			}
		})
	}
}

func TestApplyConfiguration(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t)
	ac := corev1ac.ConfigMap("settings", "default").WithData(map[string]string{"color": "blue"})
	if err := c.Apply(t.Context(), ac, ctrlclient.FieldOwner("website"), ctrlclient.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	req := last[*polyopv1alpha1.PatchRequest](t, f)
	if req.GetType() != polyopv1alpha1.PatchType_PATCH_TYPE_APPLY || !req.GetOptions().GetForce() || req.GetOptions().GetFieldManager() != "website" {
		t.Errorf("request = %v", req)
	}
	if req.GetKind().GetKind() != "ConfigMap" || req.GetKey().GetNamespace() != "default" || req.GetKey().GetName() != "settings" {
		t.Errorf("request names %v %v", req.GetKind(), req.GetKey())
	}
	if ac.ResourceVersion == nil || *ac.ResourceVersion == "" {
		t.Error("the answer was not decoded into the apply configuration")
	}

	err := c.Apply(t.Context(), appsv1ac.Deployment("", "default"))
	if err == nil || !strings.Contains(err.Error(), "no name") {
		t.Errorf("applying a configuration without a name: %v", err)
	}
}

func TestSubResources(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t, deployment("web", 1))
	ctx := t.Context()
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, ctrlclient.ObjectKey{Namespace: "default", Name: "web"}, d); err != nil {
		t.Fatal(err)
	}

	d.Status.ReadyReplicas = 1
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	if req := last[*polyopv1alpha1.UpdateRequest](t, f); req.GetSubresource() != "status" {
		t.Errorf("status update sent as %v", req)
	}
	if d.Status.ReadyReplicas != 1 {
		t.Error("the status update was not decoded back")
	}

	base := d.DeepCopy()
	d.Status.AvailableReplicas = 1
	if err := c.Status().Patch(ctx, d, ctrlclient.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if req := last[*polyopv1alpha1.PatchRequest](t, f); req.GetSubresource() != "status" || string(req.GetPatch()) != `{"status":{"availableReplicas":1}}` {
		t.Errorf("status patch sent as %v %s", req.GetSubresource(), req.GetPatch())
	}

	got := &appsv1.Deployment{}
	if err := c.SubResource("status").Get(ctx, d, got); err != nil || got.Status.AvailableReplicas != 1 {
		t.Errorf("reading the status subresource: %v, %+v", err, got.Status)
	}

	// A scale update goes out as a merge patch of the scale subresource of the
	// deployment, with the Scale as its body. The fake store cannot scale, so
	// the request alone is checked.
	f.failNext(status.Error(codes.Unimplemented, "the fake cannot scale"))
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	_ = c.SubResource("scale").Update(ctx, d, ctrlclient.WithSubResourceBody(scale))
	req := last[*polyopv1alpha1.PatchRequest](t, f)
	if req.GetSubresource() != "scale" || req.GetKind().GetKind() != "Deployment" || req.GetKey().GetName() != "web" ||
		req.GetType() != polyopv1alpha1.PatchType_PATCH_TYPE_MERGE || !strings.Contains(string(req.GetPatch()), `"spec":{"replicas":3}`) {
		t.Errorf("scale update sent as %v %s", req, req.GetPatch())
	}
	if scale.Name != "web" || scale.Namespace != "default" {
		t.Errorf("the scale body was not named after the object: %+v", scale.ObjectMeta)
	}

	// Reading and creating other subresources name the subresource and the
	// object it belongs to; the fake has no subresources, so the requests
	// alone are checked (test/conformance runs them against an API server).
	f.failNext(status.Error(codes.Unimplemented, "the fake has no scale"))
	_ = c.SubResource("scale").Get(ctx, d, &autoscalingv1.Scale{})
	if req := last[*polyopv1alpha1.GetRequest](t, f); req.GetSubresource() != "scale" || req.GetKind().GetKind() != "Deployment" || req.GetKey().GetName() != "web" {
		t.Errorf("scale read sent as %v", req)
	}
	// The fake evicts as the API server does: it deletes the pod and answers
	// a Status, which leaves the Eviction as it was.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eviction := &policyv1.Eviction{DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}}
	if err := c.SubResource("eviction").Create(ctx, pod, eviction, ctrlclient.FieldOwner("evictor")); err != nil {
		t.Fatal(err)
	}
	creq := last[*polyopv1alpha1.CreateRequest](t, f)
	if creq.GetSubresource() != "eviction" || creq.GetKind().GetKind() != "Pod" || creq.GetKey().GetName() != "p" ||
		creq.GetKey().GetNamespace() != "default" || creq.GetOptions().GetFieldManager() != "evictor" ||
		!strings.Contains(string(creq.GetObject()), `"kind":"Eviction"`) {
		t.Errorf("eviction sent as %v %s", creq, creq.GetObject())
	}
	if eviction.Kind == "Status" || eviction.DeleteOptions == nil {
		t.Errorf("the Status answered replaced the eviction: %+v", eviction)
	}
	if err := c.Get(ctx, ctrlclient.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the evicted pod: %v, want NotFound", err)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t, deployment("web", 1))
	d := deployment("web", 1)
	err := c.Delete(t.Context(), d,
		ctrlclient.PropagationPolicy(metav1.DeletePropagationForeground),
		ctrlclient.Preconditions{UID: new(types.UID("uid-1")), ResourceVersion: new("42")},
		ctrlclient.GracePeriodSeconds(5),
		ctrlclient.DryRunAll,
	)
	if err != nil {
		t.Fatal(err)
	}
	req := last[*polyopv1alpha1.DeleteRequest](t, f)
	if req.GetPropagation() != polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_FOREGROUND ||
		req.GetPreconditionUid() != "uid-1" || req.GetPreconditionResourceVersion() != "42" ||
		req.GracePeriodSeconds == nil || req.GetGracePeriodSeconds() != 5 || !req.GetOptions().GetDryRun() {
		t.Errorf("request = %v", req)
	}

	if err := c.Delete(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	if req := last[*polyopv1alpha1.DeleteRequest](t, f); req.GracePeriodSeconds != nil || req.GetPropagation() != polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_UNSPECIFIED {
		t.Errorf("a plain delete sent %v", req)
	}
	if err := c.Delete(t.Context(), d); !apierrors.IsNotFound(err) {
		t.Errorf("deleting again: %v, want NotFound", err)
	}
}

func TestDeleteAllOf(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t,
		configMap("a", map[string]string{"tier": "web"}),
		configMap("b", map[string]string{"tier": "web"}),
		configMap("c", map[string]string{"tier": "db"}),
	)
	ctx := t.Context()
	err := c.DeleteAllOf(ctx, &corev1.ConfigMap{}, ctrlclient.InNamespace("default"), ctrlclient.MatchingLabels{"tier": "web"},
		ctrlclient.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil {
		t.Fatal(err)
	}
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "c" {
		t.Errorf("left %d config maps, want only c", len(list.Items))
	}
	lists := 0
	f.mu.Lock()
	for _, r := range f.requests {
		if l, ok := r.(*polyopv1alpha1.ListRequest); ok && l.GetLabelSelector() == "tier=web" {
			lists++
			if !l.GetOptions().GetUncached() || l.GetNamespace() != "default" || l.GetLimit() == 0 {
				t.Errorf("DeleteAllOf listed with %v, want an uncached, paged list", l)
			}
		}
	}
	f.mu.Unlock()
	if lists != 1 {
		t.Errorf("DeleteAllOf listed %d times", lists)
	}
	if got := last[*polyopv1alpha1.DeleteRequest](t, f).GetPropagation(); got != polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_BACKGROUND {
		t.Errorf("propagation = %v", got)
	}
}

func TestRESTMapper(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t)
	mapper := c.RESTMapper()

	mapping, err := mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if mapping.Resource.Resource != "deployments" || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Errorf("mapping = %+v", mapping)
	}
	if _, err := mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1"); err != nil {
		t.Fatal(err)
	}
	if n := count[*polyopv1alpha1.ResolveKindRequest](f); n != 1 {
		t.Errorf("the host was asked %d times, want once: answers are cached", n)
	}

	namespaced, err := c.IsObjectNamespaced(&corev1.Namespace{})
	if err != nil || namespaced {
		t.Errorf("a Namespace is namespaced: %v, %v", namespaced, err)
	}
	namespaced, err = c.IsObjectNamespaced(&corev1.ConfigMap{})
	if err != nil || !namespaced {
		t.Errorf("a ConfigMap is not namespaced: %v, %v", namespaced, err)
	}

	_, err = mapper.RESTMapping(schema.GroupKind{Group: "examples.polyop.dev", Kind: "Nothing"}, "v1")
	if !meta.IsNoMatchError(err) {
		t.Errorf("an unknown kind: %v, want a no-match error", err)
	}

	gvk, err := mapper.KindFor(schema.GroupVersionResource{Resource: "deployments"})
	if err != nil || gvk != deploymentGVK {
		t.Errorf("KindFor(deployments) = %v, %v", gvk, err)
	}
	if singular, err := mapper.ResourceSingularizer("deployments"); err != nil || singular != "deployment" {
		t.Errorf("singular = %q, %v", singular, err)
	}
	if _, err := mapper.KindFor(schema.GroupVersionResource{Resource: "widgets"}); !meta.IsNoMatchError(err) {
		t.Errorf("KindFor of an unresolved resource: %v", err)
	}

	gvk, err = c.GroupVersionKindFor(&appsv1.Deployment{})
	if err != nil || gvk != deploymentGVK {
		t.Errorf("GroupVersionKindFor = %v, %v", gvk, err)
	}
}

func TestRecordEvent(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t)
	d := deployment("web", 1)
	if err := c.RecordEvent(t.Context(), d, corev1.EventTypeWarning, "Scaled", "Scaling", "scaled to 1"); err != nil {
		t.Fatal(err)
	}
	req := last[*polyopv1alpha1.RecordEventRequest](t, f)
	if req.GetKind().GetKind() != "Deployment" || req.GetKey().GetName() != "web" ||
		req.GetEvent().GetType() != polyopv1alpha1.EventType_EVENT_TYPE_WARNING || req.GetEvent().GetReason() != "Scaled" ||
		req.GetEvent().GetAction() != "Scaling" || req.GetEvent().GetMessage() != "scaled to 1" {
		t.Errorf("request = %v", req)
	}

	// The recorder waits for the host to take the event.
	client.NewEventRecorder(c).Eventf(d, nil, corev1.EventTypeNormal, "Created", "Creating", "created %d pods", 3)
	if n := count[*polyopv1alpha1.RecordEventRequest](f); n != 2 {
		t.Fatalf("the host received %d events once Eventf returned, want 2", n)
	}
	if e := last[*polyopv1alpha1.RecordEventRequest](t, f).GetEvent(); e.GetMessage() != "created 3 pods" || e.GetAction() != "Creating" {
		t.Errorf("event = %v", e)
	}
}

func TestTarget(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		address string
		want    string
		wantErr string
	}{
		"if the address is an absolute unix socket, then it is dialed as it is":            {address: "unix:///var/run/polyop/cluster.sock", want: "unix:///var/run/polyop/cluster.sock"},
		"if the address is a relative unix socket, then it is dialed at its absolute path": {address: "unix:cluster.sock", want: "unix://" + sdktest.WorkingDir(t) + "/cluster.sock"},
		"if the address is tcp://, then it is dialed through DNS":                          {address: "tcp://localhost:9444", want: "dns:///localhost:9444"},
		"if the address is host:port, then it is dialed through DNS":                       {address: "127.0.0.1:9444", want: "dns:///127.0.0.1:9444"},
		"if unix:// has a relative path, then it is refused":                               {address: "unix://cluster.sock", wantErr: "absolute path"},
		"if the scheme is unknown, then it is refused":                                     {address: "http://localhost:80", wantErr: "must be unix or tcp"},
		"if there is no port, then it is refused":                                          {address: "localhost", wantErr: "neither"},
		"if the address is empty, then it is refused":                                      {address: "", wantErr: "empty"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := client.Target(tc.address)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Target(%q) = %q, %v; want %q", tc.address, got, err, tc.want)
			}
		})
	}
}

func TestNewTakesTheAddressFromTheEnvironment(t *testing.T) {
	t.Setenv(client.AddressEnv, "")
	if _, err := client.New(client.Options{}); err == nil || !strings.Contains(err.Error(), client.AddressEnv) {
		t.Errorf("without an address: %v", err)
	}
	t.Setenv(client.AddressEnv, "unix:///tmp/polyop-cluster.sock")
	c, err := client.New(client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
}
