package cluster

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func TestWritesOutsideTheWatchedNamespacesAreForbidden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cm := func(ns, name string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"` + ns + `","name":"` + name + `"}}`)
	}
	key := func(ns string) *polyopv1alpha1.ObjectKey { return &polyopv1alpha1.ObjectKey{Namespace: ns, Name: "a"} }
	writes := map[string]func(s *Server, ns string) error{
		"create": func(s *Server, ns string) error {
			_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Namespace: ns, Name: "new"}, Object: cm(ns, "new")})
			return err
		},
		"update": func(s *Server, ns string) error {
			_, err := s.Update(ctx, &polyopv1alpha1.UpdateRequest{Kind: configMap, Key: key(ns), Object: cm(ns, "a")})
			return err
		},
		"patch": func(s *Server, ns string) error {
			_, err := s.Patch(ctx, &polyopv1alpha1.PatchRequest{Kind: configMap, Key: key(ns), Type: polyopv1alpha1.PatchType_PATCH_TYPE_MERGE, Patch: []byte(`{"data":{"x":"y"}}`)})
			return err
		},
		"delete": func(s *Server, ns string) error {
			_, err := s.Delete(ctx, &polyopv1alpha1.DeleteRequest{Kind: configMap, Key: key(ns)})
			return err
		},
		"create the eviction subresource": func(s *Server, ns string) error {
			_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Subresource: "eviction", Kind: configMap, Key: key(ns),
				Object: []byte(`{"apiVersion":"policy/v1","kind":"Eviction"}`)})
			return err
		},
		"record an event": func(s *Server, ns string) error {
			_, err := s.RecordEvent(ctx, &polyopv1alpha1.RecordEventRequest{Kind: configMap, Key: key(ns), Event: &polyopv1alpha1.Event{Reason: "Seen"}})
			return err
		},
	}
	for verb, write := range writes {
		t.Run("if the sidecar tries to "+verb+" outside the watched namespaces, then PERMISSION_DENIED with reason Forbidden", func(t *testing.T) {
			t.Parallel()
			s, _ := newTestServer(t)
			s.opts.WriteNamespaces = []string{"cached", "other"}
			err := write(s, "kube-system")
			st, _ := status.FromError(err)
			if st.Code() != codes.PermissionDenied {
				t.Fatalf("%s in kube-system: %v, want PERMISSION_DENIED", verb, err)
			}
			d, ok := detail(st)
			if !ok || d.Reason != metav1.StatusReasonForbidden || d.Code != 403 {
				t.Fatalf("%s in kube-system: APIError %+v, want reason Forbidden, code 403", verb, d)
			}
			for _, want := range []string{`configmaps "`, verb, "(cached, other)", `not in "kube-system"`, `a controller must watch "kube-system"`, "--namespace"} {
				if !strings.Contains(st.Message(), want) {
					t.Errorf("message %q does not contain %q", st.Message(), want)
				}
			}
		})
		t.Run("if the sidecar tries to "+verb+" in a watched namespace, then it is not forbidden", func(t *testing.T) {
			t.Parallel()
			s, _ := newTestServer(t)
			s.opts.WriteNamespaces = []string{"cached"}
			if err := write(s, "cached"); status.Code(err) == codes.PermissionDenied {
				t.Errorf("%s in a watched namespace: %v", verb, err)
			}
		})
		t.Run("if the host watches every namespace, then the sidecar may "+verb+" in any", func(t *testing.T) {
			t.Parallel()
			s, _ := newTestServer(t)
			if err := write(s, "kube-system"); status.Code(err) == codes.PermissionDenied {
				t.Errorf("%s with no namespace limit: %v", verb, err)
			}
		})
	}
	t.Run("cluster-scoped objects are left to RBAC", func(t *testing.T) {
		t.Parallel()
		s, _ := newTestServer(t)
		s.opts.WriteNamespaces = []string{"cached"}
		_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: namespace, Key: &polyopv1alpha1.ObjectKey{Name: "fresh"}, Object: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"fresh"}}`)})
		if err != nil {
			t.Errorf("creating a Namespace: %v", err)
		}
	})
}
