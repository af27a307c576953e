package cluster

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/polyop/polyop/internal/description"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

var (
	secretGVK             = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	clusterRoleBindingGVK = rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding")
	secret                = &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"}
	clusterRoleBinding    = &polyopv1alpha1.GroupVersionKind{Group: rbacv1.GroupName, Version: "v1", Kind: "ClusterRoleBinding"}
)

// describeConfigMaps is a description whose one controller reconciles
// ConfigMaps in namespace "app", changed by each of with.
func describeConfigMaps(with ...func(*description.Description)) *description.Description {
	d := &description.Description{Name: "probe", Controllers: []description.Controller{{
		Name: "configmaps", GVK: configMapGVK, Namespaces: []string{"app"}, LabelSelector: labels.Everything(), MaxConcurrentReconciles: 1,
	}}}
	for _, w := range with {
		w(d)
	}
	return d
}

func watchingSecrets(d *description.Description) {
	d.Controllers[0].Watches = append(d.Controllers[0].Watches, description.Watch{GVK: secretGVK, Label: "configmap"})
}

func cachingSecretsEverywhere(d *description.Description) {
	d.CachedKinds = append(d.CachedKinds, description.CachedKind{GVK: secretGVK})
}

func cachingClusterRoleBindings(d *description.Description) {
	d.CachedKinds = append(d.CachedKinds, description.CachedKind{GVK: clusterRoleBindingGVK})
}

// grantedServer serves what desc grants, over an API server that holds
// Secret "s" and ConfigMap "a" in namespaces "app" and "other", and those
// namespaces. A nil desc gives the server no grants, as polyop render's.
func grantedServer(t *testing.T, desc *description.Description) *Server {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, rbacv1.SchemeGroupVersion})
	mapper.Add(configMapGVK, meta.RESTScopeNamespace)
	mapper.Add(secretGVK, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	mapper.Add(clusterRoleBindingGVK, meta.RESTScopeRoot)
	var opts Options
	if desc != nil {
		res, err := description.Resolve(mapper, desc, description.ResolveOptions{WebhooksOff: true})
		if err != nil {
			t.Fatal(err)
		}
		opts.Grants = res.Grants()
	}
	var objs []client.Object
	for _, ns := range []string{"app", "other"} {
		objs = append(objs,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}},
		)
	}
	api := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
	var dynObjs []runtime.Object
	for _, o := range objs {
		dynObjs = append(dynObjs, o.DeepCopyObject())
	}
	dyn := dynamicfake.NewSimpleDynamicClient(clientgoscheme.Scheme, dynObjs...)
	return New(Clients{APIReader: api, Dynamic: dyn, Mapper: mapper, Recorder: &fakeRecorder{}}, opts)
}

func TestTheServiceServesOnlyWhatTheDescriptionGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in := func(ns, name string) *polyopv1alpha1.ObjectKey {
		return &polyopv1alpha1.ObjectKey{Namespace: ns, Name: name}
	}
	createBinding := func(s *Server) error {
		_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: clusterRoleBinding, Key: &polyopv1alpha1.ObjectKey{Name: "probe-admin"},
			Object: []byte(`{"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},` +
				`"subjects":[{"kind":"ServiceAccount","name":"probe","namespace":"app"}]}`)})
		return err
	}
	getSecret := func(ns string) func(s *Server) error {
		return func(s *Server) error {
			_, err := s.Get(ctx, &polyopv1alpha1.GetRequest{Kind: secret, Key: in(ns, "s"), Options: &polyopv1alpha1.ReadOptions{Uncached: true}})
			return err
		}
	}
	listSecrets := func(ns string) func(s *Server) error {
		return func(s *Server) error {
			_, err := s.List(ctx, &polyopv1alpha1.ListRequest{Kind: secret, Namespace: ns, Options: &polyopv1alpha1.ReadOptions{Uncached: true}})
			return err
		}
	}
	for name, tc := range map[string]struct {
		desc *description.Description
		call func(*Server) error
		// denied lists what the refusal must say; none: the call is served.
		denied []string
	}{
		"if the description does not name ClusterRoleBindings, then creating one is refused, saying how to declare it": {
			desc: describeConfigMaps(), call: createBinding,
			denied: []string{`clusterrolebindings.rbac.authorization.k8s.io "probe-admin" is forbidden`, "may not create ClusterRoleBinding.rbac.authorization.k8s.io/v1",
				"does not declare ClusterRoleBinding", "ControllerDescription.owns or .watches", "DescribeResponse.cached_kinds"},
		},
		"if the description caches ClusterRoleBindings, then creating one is served": {
			desc: describeConfigMaps(cachingClusterRoleBindings), call: createBinding,
		},
		"if the server has no grants, then it writes any kind": {
			call: createBinding,
		},
		"if the description does not name Namespaces, then deleting one is refused": {
			desc: describeConfigMaps(),
			call: func(s *Server) error {
				_, err := s.Delete(ctx, &polyopv1alpha1.DeleteRequest{Kind: namespace, Key: &polyopv1alpha1.ObjectKey{Name: "other"}})
				return err
			},
			denied: []string{`namespaces "other" is forbidden`, "may not delete Namespace.v1", "cached_kinds"},
		},
		"if the description does not name Namespaces, then reading one is left to RBAC": {
			desc: describeConfigMaps(),
			call: func(s *Server) error {
				_, err := s.Get(ctx, &polyopv1alpha1.GetRequest{Kind: namespace, Key: &polyopv1alpha1.ObjectKey{Name: "other"}})
				return err
			},
		},
		"if the description does not name Namespaces, then recording an event about one is served: the event is what is written": {
			desc: describeConfigMaps(),
			call: func(s *Server) error {
				_, err := s.RecordEvent(ctx, &polyopv1alpha1.RecordEventRequest{Kind: namespace, Key: &polyopv1alpha1.ObjectKey{Name: "app"}, Event: &polyopv1alpha1.Event{Reason: "Seen"}})
				return err
			},
		},
		"if a controller reconciles ConfigMaps, then patching one is served, and its status subresource too": {
			desc: describeConfigMaps(),
			call: func(s *Server) error {
				for _, sub := range []string{"", "status"} {
					if _, err := s.Patch(ctx, &polyopv1alpha1.PatchRequest{Kind: configMap, Key: in("app", "a"), Subresource: sub,
						Type: polyopv1alpha1.PatchType_PATCH_TYPE_MERGE, Patch: []byte(`{"data":{"x":"y"}}`)}); status.Code(err) == codes.PermissionDenied {
						return err
					}
				}
				return nil
			},
		},
		"if the description does not name Secrets, then updating one is refused": {
			desc: describeConfigMaps(),
			call: func(s *Server) error {
				_, err := s.Update(ctx, &polyopv1alpha1.UpdateRequest{Kind: secret, Key: in("app", "s"), Object: []byte(`{"data":{}}`)})
				return err
			},
			denied: []string{`secrets "s" is forbidden`, "may not update Secret.v1", "does not declare Secret"},
		},
		"if the description does not name Secrets, then getting one is refused, saying they are declared nowhere": {
			desc: describeConfigMaps(), call: getSecret("app"),
			denied: []string{`secrets "s" is forbidden`, `may not get Secret.v1 in namespace "app"`, "declares them nowhere", "DescribeResponse.cached_kinds"},
		},
		"if the description does not name Secrets, then listing them is refused": {
			desc: describeConfigMaps(), call: listSecrets("app"),
			denied: []string{"is forbidden", `may not list Secret.v1 in namespace "app"`, "declares them nowhere"},
		},
		"if a controller watches Secrets in app, then getting one there is served": {
			desc: describeConfigMaps(watchingSecrets), call: getSecret("app"),
		},
		"if a controller watches Secrets in app, then getting one in another namespace is refused, saying where they are declared": {
			desc: describeConfigMaps(watchingSecrets), call: getSecret("other"),
			denied: []string{`may not get Secret.v1 in namespace "other"`, "declares them in namespaces app only"},
		},
		"if a controller watches Secrets in app, then listing them across every namespace is refused": {
			desc: describeConfigMaps(watchingSecrets), call: listSecrets(""),
			denied: []string{"may not list Secret.v1 across every namespace", "declares them in namespaces app only"},
		},
		"if the description caches Secrets in every namespace, then listing them across every namespace is served": {
			desc: describeConfigMaps(cachingSecretsEverywhere), call: listSecrets(""),
		},
		"if the server has no grants, then it reads Secrets": {
			call: getSecret("other"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := tc.call(grantedServer(t, tc.desc))
			if len(tc.denied) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			st, _ := status.FromError(err)
			if st.Code() != codes.PermissionDenied {
				t.Fatalf("%v, want PERMISSION_DENIED", err)
			}
			if d, ok := detail(st); !ok || d.Reason != metav1.StatusReasonForbidden || d.Code != 403 {
				t.Errorf("APIError %+v, want reason Forbidden, code 403", d)
			}
			for _, want := range tc.denied {
				if !strings.Contains(st.Message(), want) {
					t.Errorf("message %q does not say %q", st.Message(), want)
				}
			}
		})
	}
}
