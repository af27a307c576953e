package cluster

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/polyop/polyop/internal/index"
	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// newIndexedServer is newTestServer with ConfigMaps declared for cached reads
// by the sidecar, and indexed by the declared index "data.from".
func newIndexedServer(t *testing.T) *Server {
	t.Helper()
	s, _ := newTestServer(t)
	from, err := index.FieldPath(".data.from")
	if err != nil {
		t.Fatal(err)
	}
	// The fake cache answers a List by an index as the host's cache does:
	// from the index function, with "<name>=<value>" exact matches only.
	cached := object.New(configMapGVK)
	if err := s.clients.Cache.Get(context.Background(), client.ObjectKey{Namespace: "cached", Name: "a"}, cached); err != nil {
		t.Fatal(err)
	}
	s.clients.Cache = fake.NewClientBuilder().WithScheme(s.clients.Cache.(client.Client).Scheme()).WithObjects(cached).
		WithIndex(object.New(configMapGVK), "data.from", index.IndexerFunc("ConfigMap", "data.from", from, logr.Discard())).Build()
	s.opts.DeclaredKinds = map[schema.GroupVersionKind]bool{configMapGVK: true}
	s.opts.Indexes = map[schema.GroupVersionKind][]string{configMapGVK: {"data.from"}}
	return s
}

func TestListByADeclaredIndexIsServedFromTheCache(t *testing.T) {
	t.Parallel()
	s := newIndexedServer(t)
	ctx := context.Background()
	for value, want := range map[string]int{"cache": 1, "api": 0} {
		resp, err := s.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMap, Namespace: "cached", FieldSelector: "data.from=" + value})
		if err != nil {
			t.Fatalf("data.from=%s: %v", value, err)
		}
		if resp.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_CACHE || len(resp.GetItems()) != want {
			t.Errorf("data.from=%s: source %s, %d items, want %d from the cache", value, resp.GetSource(), len(resp.GetItems()), want)
		}
	}
}

func TestListByAFieldWithoutAnIndexNamesTheIndexesAndARemedy(t *testing.T) {
	t.Parallel()
	s := newIndexedServer(t)
	_, err := s.List(context.Background(), &polyopv1alpha1.ListRequest{Kind: configMap, Namespace: "cached", FieldSelector: "data.other=x"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want INVALID_ARGUMENT", err)
	}
	for _, want := range []string{`"data.other=x"`, "(data.from)", "declare an index of that name on ConfigMap", "IndexDescription", "Setting uncached helps only if"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\ndoes not say %s", err, want)
		}
	}
}

// A kind the sidecar declared for cached reads is not read from the API
// server behind its back when the cache does not hold the namespace read.
func TestReadsOfADeclaredKindOutsideItsNamespacesAreRefused(t *testing.T) {
	t.Parallel()
	s := newIndexedServer(t)
	ctx := context.Background()
	_, err := s.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMap})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a List across every namespace: %v, want FAILED_PRECONDITION", err)
	}
	for _, want := range []string{"caches ConfigMap in namespaces cached only", "--namespace", "not across every namespace", "set uncached"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\ndoes not say %s", err, want)
		}
	}
	_, err = s.Get(ctx, &polyopv1alpha1.GetRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Namespace: "elsewhere", Name: "a"}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "not in namespace elsewhere") {
		t.Errorf("a Get in another namespace: %v, want FAILED_PRECONDITION naming it", err)
	}
	resp, err := s.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMap, Options: &polyopv1alpha1.ReadOptions{Uncached: true}})
	if err != nil || resp.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER {
		t.Errorf("an uncached List: %v, source %s, want the API server", err, resp.GetSource())
	}
}
