package cluster

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// cachedKey is the key of ConfigMap name in namespace "cached".
func cachedKey(name string) *polyopv1alpha1.ObjectKey {
	return &polyopv1alpha1.ObjectKey{Namespace: "cached", Name: name}
}

var (
	configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	configMap    = &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	namespace    = &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Namespace"}
)

// recordedEvent is what fakeRecorder saw.
type recordedEvent struct {
	regarding                 runtime.Object
	eventType, reason, action string
	note                      string
}

type fakeRecorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (r *fakeRecorder) Eventf(regarding, _ runtime.Object, eventType, reason, action, note string, _ ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recordedEvent{regarding, eventType, reason, action, note})
}

func (r *fakeRecorder) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, eventType, reason, action, note string, args ...any) {
	r.Eventf(regarding, related, eventType, reason, action, note, args...)
}

// newTestServer serves ConfigMaps from a cache in namespace "cached" only;
// the cache and the API server each hold a ConfigMap "a" there whose data says
// which it is, and the writes go to a fake API server that holds the API
// server's.
func newTestServer(t *testing.T) (*Server, *fakeRecorder) {
	t.Helper()
	scheme := clientgoscheme.Scheme
	cm := func(from string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cached", Name: "a", UID: "uid-a"}, Data: map[string]string{"from": from}}
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(configMapGVK, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	rec := &fakeRecorder{}
	// The host's cache holds object.Objects.
	cacheScheme := runtime.NewScheme()
	object.AddToScheme(cacheScheme, configMapGVK)
	cached := cm("cache")
	cached.SetGroupVersionKind(configMapGVK)
	raw, err := json.Marshal(cached)
	if err != nil {
		t.Fatal(err)
	}
	cachedObject := object.New(configMapGVK)
	if err := json.Unmarshal(raw, cachedObject); err != nil {
		t.Fatal(err)
	}
	s := New(Clients{
		Cache:     fake.NewClientBuilder().WithScheme(cacheScheme).WithObjects(cachedObject).Build(),
		APIReader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm("api"), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cached"}}).Build(),
		Dynamic:   dynamicfake.NewSimpleDynamicClient(scheme, cm("api")),
		Mapper:    mapper,
		Recorder:  rec,
	}, Options{CachedKinds: map[schema.GroupVersionKind][]string{configMapGVK: {"cached"}}, FieldManager: "polyop-test"})
	return s, rec
}

func TestGetRoutesBetweenCacheAndAPIServer(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		req      *polyopv1alpha1.GetRequest
		wantFrom string
		source   polyopv1alpha1.ReadSource
		code     codes.Code
	}{
		"if the host caches the kind in the namespace, then the cache": {
			req: &polyopv1alpha1.GetRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Namespace: "cached", Name: "a"}}, wantFrom: "cache", source: polyopv1alpha1.ReadSource_READ_SOURCE_CACHE,
		},
		"if the read asks for the API server, then the API server": {
			req: &polyopv1alpha1.GetRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Namespace: "cached", Name: "a"}, Options: &polyopv1alpha1.ReadOptions{Uncached: true}}, wantFrom: "api", source: polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER,
		},
		"if the host caches the kind in other namespaces only, then the API server": {
			req: &polyopv1alpha1.GetRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Namespace: "elsewhere", Name: "a"}}, code: codes.NotFound,
		},
		"if the host does not cache the kind, then the API server": {
			req: &polyopv1alpha1.GetRequest{Kind: namespace, Key: &polyopv1alpha1.ObjectKey{Name: "cached"}}, source: polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER,
		},
		"if the kind is cluster-scoped, a namespace is ignored": {
			req: &polyopv1alpha1.GetRequest{Kind: namespace, Key: &polyopv1alpha1.ObjectKey{Namespace: "x", Name: "cached"}}, source: polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER,
		},
		"if the kind is not served, then NOT_FOUND": {
			req: &polyopv1alpha1.GetRequest{Kind: &polyopv1alpha1.GroupVersionKind{Group: "x.io", Version: "v1", Kind: "Nope"}, Key: &polyopv1alpha1.ObjectKey{Name: "a"}}, code: codes.NotFound,
		},
		"if the kind has no version, then INVALID_ARGUMENT": {
			req: &polyopv1alpha1.GetRequest{Kind: &polyopv1alpha1.GroupVersionKind{Kind: "ConfigMap"}, Key: &polyopv1alpha1.ObjectKey{Namespace: "cached", Name: "a"}}, code: codes.InvalidArgument,
		},
		"if a namespaced kind is read without a namespace, then INVALID_ARGUMENT": {
			req: &polyopv1alpha1.GetRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Name: "a"}}, code: codes.InvalidArgument,
		},
		"if there is no name, then INVALID_ARGUMENT": {
			req: &polyopv1alpha1.GetRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Namespace: "cached"}}, code: codes.InvalidArgument,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resp, err := s.Get(ctx, tc.req)
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %s (%v), want %s", got, err, tc.code)
			}
			if err != nil {
				return
			}
			if resp.GetSource() != tc.source {
				t.Errorf("source %s, want %s", resp.GetSource(), tc.source)
			}
			if tc.wantFrom != "" && !strings.Contains(string(resp.GetObject()), `"from":"`+tc.wantFrom+`"`) {
				t.Errorf("object %s, want the one from the %s", resp.GetObject(), tc.wantFrom)
			}
		})
	}
}

func TestListRoutesWhatTheCacheCannotAnswerToTheAPIServer(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t)
	ctx := context.Background()
	resp, err := s.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMap, Namespace: "cached", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_CACHE || len(resp.GetItems()) != 1 || !strings.Contains(string(resp.GetItems()[0]), `"kind":"ConfigMap"`) {
		t.Errorf("from the cache: source %s, items %q", resp.GetSource(), resp.GetItems())
	}
	resp, err = s.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMap, Namespace: "cached", ContinueToken: "next"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER {
		t.Errorf("a continued List came from %s, want the API server", resp.GetSource())
	}
	resp, err = s.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMap})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER {
		t.Errorf("a List across every namespace, of a kind cached in some only, came from %s, want the API server", resp.GetSource())
	}
	if _, err := s.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMap, LabelSelector: "a in in"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a malformed label selector: %v, want INVALID_ARGUMENT", err)
	}
}

func TestWritesRefuseMalformedRequests(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t)
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"if the object is not JSON": func() error {
			_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMap, Key: cachedKey("a"), Object: []byte("{")})
			return err
		},
		"if the object is not a JSON object": func() error {
			_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMap, Key: cachedKey("a"), Object: []byte("[]")})
			return err
		},
		"if a create names no kind": func() error {
			_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Key: cachedKey("a"), Object: []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)})
			return err
		},
		"if a create of a namespaced kind has no key.namespace": func() error {
			_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Name: "a"}, Object: []byte(`{"metadata":{"namespace":"cached"}}`)})
			return err
		},
		"if a create has neither key.name nor metadata.generateName": func() error {
			_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMap, Key: cachedKey(""), Object: []byte(`{}`)})
			return err
		},
		"if a subresource create names no object it belongs to": func() error {
			_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Subresource: "eviction", Object: []byte(`{"apiVersion":"policy/v1","kind":"Eviction"}`)})
			return err
		},
		"if a subresource create has no body": func() error {
			_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Subresource: "eviction", Kind: configMap, Key: cachedKey("a")})
			return err
		},
		"if a subresource's body names another object": func() error {
			_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{
				Subresource: "eviction", Kind: configMap, Key: cachedKey("a"),
				Object: []byte(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"namespace":"elsewhere"}}`),
			})
			return err
		},
		"if an update names no object": func() error {
			_, err := s.Update(ctx, &polyopv1alpha1.UpdateRequest{Kind: configMap, Key: cachedKey(""), Object: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"cached"}}`)})
			return err
		},
		"if the patch type is unspecified": func() error {
			_, err := s.Patch(ctx, &polyopv1alpha1.PatchRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Namespace: "cached", Name: "a"}, Patch: []byte("{}")})
			return err
		},
		"if the patch is empty": func() error {
			_, err := s.Patch(ctx, &polyopv1alpha1.PatchRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Namespace: "cached", Name: "a"}, Type: polyopv1alpha1.PatchType_PATCH_TYPE_MERGE})
			return err
		},
		"if the propagation policy is unknown": func() error {
			_, err := s.Delete(ctx, &polyopv1alpha1.DeleteRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Namespace: "cached", Name: "a"}, Propagation: 42})
			return err
		},
		"if an event has no reason": func() error {
			_, err := s.RecordEvent(ctx, &polyopv1alpha1.RecordEventRequest{Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Namespace: "cached", Name: "a"}, Event: &polyopv1alpha1.Event{}})
			return err
		},
	} {
		t.Run(name+", then INVALID_ARGUMENT without an API status", func(t *testing.T) {
			t.Parallel()
			err := call()
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument {
				t.Errorf("%v, want INVALID_ARGUMENT", err)
			}
			if _, ok := detail(st); ok {
				t.Errorf("a malformed request carries an APIError detail")
			}
		})
	}
}

func TestCreateDefaultsTheFieldManager(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t)
	resp, err := s.Create(context.Background(), &polyopv1alpha1.CreateRequest{
		Kind: configMap, Key: cachedKey("new"),
		Object: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new","namespace":"cached"}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.GetObject()), `"name":"new"`) {
		t.Errorf("Create answered %s", resp.GetObject())
	}
	if got := s.fieldManager(nil); got != "polyop-test" {
		t.Errorf("default field manager %q, want polyop-test", got)
	}
	if got := s.fieldManager(&polyopv1alpha1.WriteOptions{FieldManager: "mine"}); got != "mine" {
		t.Errorf("field manager %q, want the one asked for", got)
	}
}

func TestRecordEventNamesTheObjectReadFromTheCache(t *testing.T) {
	t.Parallel()
	s, rec := newTestServer(t)
	_, err := s.RecordEvent(context.Background(), &polyopv1alpha1.RecordEventRequest{
		Kind: configMap, Key: &polyopv1alpha1.ObjectKey{Namespace: "cached", Name: "a"},
		Event: &polyopv1alpha1.Event{Type: polyopv1alpha1.EventType_EVENT_TYPE_WARNING, Reason: "Poked", Message: "hello"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.events) != 1 {
		t.Fatalf("%d events recorded, want 1", len(rec.events))
	}
	e := rec.events[0]
	obj, ok := e.regarding.(metav1.Object)
	if !ok || obj.GetUID() != "uid-a" || e.eventType != corev1.EventTypeWarning || e.reason != "Poked" || e.action != "Poked" {
		t.Errorf("recorded %+v, want a Warning Poked event regarding ConfigMap a with its UID, action defaulted to the reason", e)
	}
}

func TestResolveKind(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t)
	resp, err := s.ResolveKind(context.Background(), &polyopv1alpha1.ResolveKindRequest{Kind: &polyopv1alpha1.GroupVersionKind{Kind: "ConfigMap"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetKind().GetVersion() != "v1" || resp.GetResource() != "configmaps" || !resp.GetNamespaced() {
		t.Errorf("%v, want v1 configmaps, namespaced", resp)
	}
	if _, err := s.ResolveKind(context.Background(), &polyopv1alpha1.ResolveKindRequest{Kind: &polyopv1alpha1.GroupVersionKind{Kind: "Nope"}}); status.Code(err) != codes.NotFound {
		t.Errorf("an unknown kind: %v, want NOT_FOUND", err)
	}
}

func TestParseAddress(t *testing.T) {
	t.Parallel()
	for address, want := range map[string]string{
		"unix:///var/run/polyop/cluster.sock": "unix /var/run/polyop/cluster.sock",
		"unix:run/cluster.sock":               "unix " + testenv.WorkingDir(t) + "/run/cluster.sock",
		"tcp://127.0.0.1:9000":                "tcp 127.0.0.1:9000",
		"localhost:9000":                      "tcp localhost:9000",
		"unix://relative.sock":                "error",
		"unix:":                               "error",
		"http://x:1":                          "error",
		"nohost":                              "error",
		"":                                    "error",
	} {
		network, addr, err := parseAddress(address)
		got := network + " " + addr
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("parseAddress(%q) = %q, want %q", address, got, want)
		}
	}
}

func TestListenReplacesAStaleSocketOnly(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "po-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "sub", "cluster.sock")

	// A socket left behind by a process that is gone.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = stale.Close()

	s := New(Clients{}, Options{})
	if err := s.Listen("unix://" + path); err != nil {
		t.Fatalf("a stale socket was not replaced: %v", err)
	}
	t.Cleanup(func() { _ = s.lis.Close() })
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o660 {
		t.Errorf("socket permissions %o, want 660", perm)
	}

	// A socket someone serves on is not taken over.
	if err := New(Clients{}, Options{}).Listen("unix://" + path); err == nil || !strings.Contains(err.Error(), "another process serves") {
		t.Errorf("listening on a live socket: %v, want a refusal", err)
	}
}

func TestWritesAddressTheirObjectByKindAndKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	create := func(s *Server, key *polyopv1alpha1.ObjectKey, body string) ([]byte, error) {
		resp, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMap, Key: key, Object: []byte(body)})
		return resp.GetObject(), err
	}
	update := func(s *Server, key *polyopv1alpha1.ObjectKey, body string) ([]byte, error) {
		resp, err := s.Update(ctx, &polyopv1alpha1.UpdateRequest{Kind: configMap, Key: key, Object: []byte(body)})
		return resp.GetObject(), err
	}
	for name, tc := range map[string]struct {
		write func(*Server, *polyopv1alpha1.ObjectKey, string) ([]byte, error)
		key   *polyopv1alpha1.ObjectKey
		body  string
		want  []string // in the written object, or in the error's message
		code  codes.Code
	}{
		"if a create's object leaves out apiVersion, kind, namespace and name, then kind and key fill them in": {
			write: create, key: cachedKey("filled"), body: `{"data":{"k":"v"}}`,
			want: []string{`"apiVersion":"v1"`, `"kind":"ConfigMap"`, `"namespace":"cached"`, `"name":"filled"`, `"k":"v"`},
		},
		"if an update's object leaves them out, then kind and key fill them in": {
			write: update, key: cachedKey("a"), body: `{"data":{"k":"updated"}}`,
			want: []string{`"apiVersion":"v1"`, `"kind":"ConfigMap"`, `"namespace":"cached"`, `"name":"a"`, `"k":"updated"`},
		},
		"if a create's object says what kind and key say, then it is written": {
			write: create, key: cachedKey("same"), body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"cached","name":"same"}}`,
			want: []string{`"name":"same"`},
		},
		"if a create has no key.name and the object a generateName, then it is written": {
			write: create, key: cachedKey(""), body: `{"metadata":{"generateName":"gen-"}}`,
			want: []string{`"generateName":"gen-"`},
		},
		"if the object's apiVersion differs from kind, then INVALID_ARGUMENT naming both": {
			write: create, key: cachedKey("x"), body: `{"apiVersion":"apps/v1"}`, code: codes.InvalidArgument,
			want: []string{`apiVersion is "apps/v1"`, `kind.group and kind.version says "v1"`},
		},
		"if the object's kind differs from kind, then INVALID_ARGUMENT naming both": {
			write: update, key: cachedKey("a"), body: `{"kind":"Secret"}`, code: codes.InvalidArgument,
			want: []string{`kind is "Secret"`, `kind.kind says "ConfigMap"`},
		},
		"if the object's name differs from key.name, then INVALID_ARGUMENT naming both": {
			write: update, key: cachedKey("a"), body: `{"metadata":{"name":"b"}}`, code: codes.InvalidArgument,
			want: []string{`metadata.name is "b"`, `key.name says "a"`},
		},
		"if the object's namespace differs from key.namespace, then INVALID_ARGUMENT naming both": {
			write: create, key: cachedKey("x"), body: `{"metadata":{"namespace":"other"}}`, code: codes.InvalidArgument,
			want: []string{`metadata.namespace is "other"`, `key.namespace says "cached"`},
		},
		"if a create's object has a name and key none, then INVALID_ARGUMENT naming it": {
			write: create, key: cachedKey(""), body: `{"metadata":{"name":"b"}}`, code: codes.InvalidArgument,
			want: []string{`metadata.name is "b"`, `key.name is empty`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, _ := newTestServer(t)
			written, err := tc.write(s, tc.key, tc.body)
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %s (%v), want %s", got, err, tc.code)
			}
			text := string(written)
			if err != nil {
				text = status.Convert(err).Message()
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("%s does not contain %s", text, w)
				}
			}
		})
	}
}

func TestWritesKeepLargeIntegersExact(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t)
	obj, _, err := s.decode("create", configMap, cachedKey("big"), []byte(`{"spec":{"big":9007199254740993}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.Object["spec"].(map[string]any)["big"]; got != int64(9007199254740993) {
		t.Errorf("spec.big decoded as %T %v, want the int64 9007199254740993", got, got)
	}
}

func TestForceIsOnlyForAnApplyPatch(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t)
	ctx := context.Background()
	force := &polyopv1alpha1.WriteOptions{Force: true}
	for name, call := range map[string]func() error{
		"a Create": func() error {
			_, err := s.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMap, Key: cachedKey("new"), Options: force, Object: []byte(`{}`)})
			return err
		},
		"an Update": func() error {
			_, err := s.Update(ctx, &polyopv1alpha1.UpdateRequest{Kind: configMap, Key: cachedKey("a"), Options: force, Object: []byte(`{}`)})
			return err
		},
		"a Delete": func() error {
			_, err := s.Delete(ctx, &polyopv1alpha1.DeleteRequest{Kind: configMap, Key: cachedKey("a"), Options: force})
			return err
		},
		"PATCH_TYPE_MERGE": func() error {
			_, err := s.Patch(ctx, &polyopv1alpha1.PatchRequest{Kind: configMap, Key: cachedKey("a"), Options: force,
				Type: polyopv1alpha1.PatchType_PATCH_TYPE_MERGE, Patch: []byte(`{"data":{"k":"v"}}`)})
			return err
		},
	} {
		t.Run("if "+name+" asks for force, then INVALID_ARGUMENT naming apply", func(t *testing.T) {
			err := call()
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "options.force") ||
				!strings.Contains(st.Message(), "PATCH_TYPE_APPLY") || !strings.Contains(st.Message(), name) {
				t.Errorf("%v, want INVALID_ARGUMENT naming options.force, PATCH_TYPE_APPLY and %s", err, name)
			}
		})
	}
}

// TestListByAFieldTheCacheDoesNotIndexNamesARemedyThatWorks checks the
// remedy the message names: uncached only for the fields the API server
// selects every kind by, an index for any other (TestClusterService in
// test/e2e shows the API server refusing such a selector).
func TestListByAFieldTheCacheDoesNotIndexNamesARemedyThatWorks(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t)
	for name, tc := range map[string]struct {
		selector      string
		want, notWant string
	}{
		"if the field is metadata.name, then read uncached": {
			selector: "metadata.name=a",
			want:     `the host's cache cannot select ConfigMap by the field selector "metadata.name=a": it selects only by exact values (=, ==) of the indexes it keeps (`,
			notWant:  "declare an index",
		},
		"if the selector is not exact, then read uncached": {
			selector: "metadata.namespace!=b",
			want:     "; set uncached to ask the API server, which selects every kind by metadata.name and metadata.namespace",
			notWant:  "declare an index",
		},
		"if the field is the kind's own, then declare an index, as the API server may refuse it too": {
			selector: "metadata.name=a,data.from=cache",
			want: "; to select by data.from, declare an index of that name on ConfigMap in the sidecar (an IndexDescription in its description), so that the host's cache keeps one. " +
				"Setting uncached helps only if ConfigMap registers the field for field selectors: the API server selects by metadata.name, metadata.namespace " +
				"and the fields the kind registers (a built-in kind's own, such as a Pod's spec.nodeName; a custom resource's selectableFields), and refuses any other",
			notWant: "set uncached to ask",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := s.List(context.Background(), &polyopv1alpha1.ListRequest{Kind: configMap, Namespace: "cached", FieldSelector: tc.selector})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("List by %q: %v\nwant INVALID_ARGUMENT containing %q and not %q", tc.selector, err, tc.want, tc.notWant)
			}
		})
	}
}

// A kind the cache holds only the replica's share of is read from the API
// server, so that an object another replica owns is found.
func TestShardedKindsAreReadFromTheAPIServer(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t)
	s.opts.ShardedKinds = map[schema.GroupVersionKind]bool{configMapGVK: true}
	ctx := context.Background()
	got, err := s.Get(ctx, &polyopv1alpha1.GetRequest{Kind: configMap, Key: cachedKey("a")})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER || !strings.Contains(string(got.GetObject()), `"from":"api"`) {
		t.Errorf("Get read %s from %s, want the API server's", got.GetObject(), got.GetSource())
	}
	list, err := s.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMap, Namespace: "cached"})
	if err != nil {
		t.Fatal(err)
	}
	if list.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER || len(list.GetItems()) != 1 || !strings.Contains(string(list.GetItems()[0]), `"from":"api"`) {
		t.Errorf("List read %d items from %s, want the API server's", len(list.GetItems()), list.GetSource())
	}
}
