package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// manualLabel marks the Widgets TestClusterService writes by hand, which its
// host does not reconcile.
const manualLabel = "e2e.polyop.dev/manual"

var (
	configMapKind = &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	widgetKind    = &polyopv1alpha1.GroupVersionKind{Group: "e2e.polyop.dev", Version: "v1", Kind: "Widget"}
)

// TestClusterService calls the host's cluster service as a sidecar does, with
// testsidecar children declaring what the host caches (Widgets, ConfigMaps,
// Secrets and ServiceAccounts in the fixture's namespace).
func TestClusterService(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	metrics := freePort(t)
	f.startChildSidecar()
	// The host also watches the namespace the API server forbids writes in
	// (below), so that its own namespace guard lets those writes through, and
	// leaves Widgets labelled manual to the test.
	gone := f.ns + "-gone"
	host := f.startHost("--metrics-bind-address", metrics, "--metrics-secure=false", "--namespace", gone, "--label-selector", "!"+manualLabel)
	cs := f.clusterClient()
	ctx := ctxTimeout(t, 5*time.Minute)
	key := func(name string) *polyopv1alpha1.ObjectKey {
		return &polyopv1alpha1.ObjectKey{Namespace: f.ns, Name: name}
	}

	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cm1", Labels: map[string]string{"app": "x"}}})
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cm2"}})
	testenv.Eventually(f.t, 2*time.Minute, "the cluster service serves from a synced cache", func() (bool, string) {
		resp, err := cs.Get(ctx, &polyopv1alpha1.GetRequest{Kind: configMapKind, Key: key("cm2")})
		if err != nil {
			return false, err.Error()
		}
		return resp.GetSource() == polyopv1alpha1.ReadSource_READ_SOURCE_CACHE, resp.GetSource().String()
	})
	// The informers of the other kinds list and watch until the controller
	// starts its workers: their requests are not the reads' own.
	if err := host.WaitForOutput(ctx, "Starting workers"); err != nil {
		t.Fatal(err)
	}

	t.Run("reads of a kind the host caches come from the cache and cost no API request", func(t *testing.T) {
		before := requestCounts(t, metrics)
		for range 20 {
			resp, err := cs.Get(ctx, &polyopv1alpha1.GetRequest{Kind: configMapKind, Key: key("cm1")})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_CACHE || !strings.Contains(string(resp.GetObject()), `"name":"cm1"`) {
				t.Fatalf("Get: source %s, object %s", resp.GetSource(), resp.GetObject())
			}
		}
		for range 5 {
			resp, err := cs.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMapKind, Namespace: f.ns, LabelSelector: "app=x"})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_CACHE || len(resp.GetItems()) != 1 || !strings.Contains(string(resp.GetItems()[0]), `"kind":"ConfigMap"`) {
				t.Fatalf("List: source %s, %d items", resp.GetSource(), len(resp.GetItems()))
			}
		}
		diff := requestDiff(before, requestCounts(t, metrics))
		t.Logf("API requests for 20 Gets and 5 Lists from the cache: %s", formatCounts(diff))
		if n := byMethod(diff, "GET"); n != 0 {
			t.Errorf("reads from the cache made %g GET requests", n)
		}
	})

	t.Run("reads of other kinds, other namespaces, or asked uncached, go to the API server", func(t *testing.T) {
		elsewhere := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: f.ns}}
		f.create(elsewhere)
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), elsewhere) })
		before := requestCounts(t, metrics)
		for name, req := range map[string]*polyopv1alpha1.GetRequest{
			"a kind the host does not cache":      {Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Key: &polyopv1alpha1.ObjectKey{Name: f.ns}},
			"a namespace the host does not watch": {Kind: configMapKind, Key: &polyopv1alpha1.ObjectKey{Namespace: "default", Name: f.ns}},
			"an uncached read":                    {Kind: configMapKind, Key: key("cm1"), Options: &polyopv1alpha1.ReadOptions{Uncached: true}},
		} {
			resp, err := cs.Get(ctx, req)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if resp.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER {
				t.Errorf("%s: source %s, want the API server", name, resp.GetSource())
			}
		}
		all, err := cs.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMapKind, LabelSelector: "app=x"})
		if err != nil {
			t.Fatal(err)
		}
		if all.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER {
			t.Errorf("a List across every namespace, of a kind cached in one: source %s, want the API server", all.GetSource())
		}
		if n := byMethod(requestDiff(before, requestCounts(t, metrics)), "GET"); n < 4 {
			t.Errorf("four reads from the API server made %g GET requests", n)
		}
	})

	t.Run("a limited List continues where it stopped; the cache returns all", func(t *testing.T) {
		for i := range 3 {
			f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("page%d", i), Labels: map[string]string{"page": "yes"}}})
		}
		first, err := cs.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMapKind, Namespace: f.ns, LabelSelector: "page=yes", Limit: 2, Options: &polyopv1alpha1.ReadOptions{Uncached: true}})
		if err != nil {
			t.Fatal(err)
		}
		if len(first.GetItems()) != 2 || first.GetContinueToken() == "" || first.GetResourceVersion() == "" {
			t.Fatalf("first page: %d items, continue %q, resourceVersion %q", len(first.GetItems()), first.GetContinueToken(), first.GetResourceVersion())
		}
		rest, err := cs.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMapKind, Namespace: f.ns, LabelSelector: "page=yes", Limit: 2, ContinueToken: first.GetContinueToken()})
		if err != nil {
			t.Fatal(err)
		}
		if len(rest.GetItems()) != 1 || rest.GetContinueToken() != "" || rest.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER {
			t.Fatalf("second page: %d items, continue %q, source %s", len(rest.GetItems()), rest.GetContinueToken(), rest.GetSource())
		}
		testenv.Eventually(f.t, time.Minute, "the cache lists all three, ignoring the limit", func() (bool, string) {
			all, err := cs.List(ctx, &polyopv1alpha1.ListRequest{Kind: configMapKind, Namespace: f.ns, LabelSelector: "page=yes", Limit: 2})
			if err != nil {
				return false, err.Error()
			}
			return len(all.GetItems()) == 3 && all.GetSource() == polyopv1alpha1.ReadSource_READ_SOURCE_CACHE, fmt.Sprintf("%d items from %s", len(all.GetItems()), all.GetSource())
		})
	})

	t.Run("a field the host indexes is selected from the cache; another is refused", func(t *testing.T) {
		f.createWidget("pointer", map[string]any{"configMapName": "cm1"})
		testenv.Eventually(f.t, time.Minute, "the widget is selected by its spec.configMapName", func() (bool, string) {
			resp, err := cs.List(ctx, &polyopv1alpha1.ListRequest{Kind: widgetKind, Namespace: f.ns, FieldSelector: "spec.configMapName=cm1"})
			if err != nil {
				return false, err.Error()
			}
			return len(resp.GetItems()) == 1 && resp.GetSource() == polyopv1alpha1.ReadSource_READ_SOURCE_CACHE, fmt.Sprintf("%d items from %s", len(resp.GetItems()), resp.GetSource())
		})
		_, err := cs.List(ctx, &polyopv1alpha1.ListRequest{Kind: widgetKind, Namespace: f.ns, FieldSelector: "spec.value=x"})
		if code, s := apiStatusOf(err); code != codes.InvalidArgument || s != nil || !strings.Contains(err.Error(), "to select by spec.value, declare an index of that name on") {
			t.Errorf("an unindexed field selector: %v, want INVALID_ARGUMENT without an API status, saying to declare an index", err)
		}
		// As the message says, the API server refuses a field the kind does
		// not register (Widget's CRD has no selectableFields): reading
		// uncached is no remedy for it.
		_, err = cs.List(ctx, &polyopv1alpha1.ListRequest{Kind: widgetKind, Namespace: f.ns, FieldSelector: "spec.value=x", Options: &polyopv1alpha1.ReadOptions{Uncached: true}})
		if _, s := apiStatusOf(err); s == nil || s.Code != 400 || s.Reason != metav1.StatusReasonBadRequest || !strings.Contains(s.Message, "field label not supported: spec.value") {
			t.Errorf("an uncached List by spec.value: %v, status %+v; want the API server's BadRequest refusing the field", err, s)
		}
		// and for metadata.name, which the message says to read uncached, the
		// cache refuses and the API server answers.
		_, err = cs.List(ctx, &polyopv1alpha1.ListRequest{Kind: widgetKind, Namespace: f.ns, FieldSelector: "metadata.name=pointer"})
		if code, _ := apiStatusOf(err); code != codes.InvalidArgument || !strings.Contains(err.Error(), "set uncached to ask the API server") {
			t.Errorf("a List by metadata.name from the cache: %v, want INVALID_ARGUMENT saying to set uncached", err)
		}
		resp, err := cs.List(ctx, &polyopv1alpha1.ListRequest{Kind: widgetKind, Namespace: f.ns, FieldSelector: "metadata.name=pointer", Options: &polyopv1alpha1.ReadOptions{Uncached: true}})
		if err != nil || len(resp.GetItems()) != 1 || resp.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER {
			t.Errorf("an uncached List by metadata.name: %v, %d items from %s; want the widget from the API server", err, len(resp.GetItems()), resp.GetSource())
		}
	})

	t.Run("a missing object is NotFound, with the API server's status", func(t *testing.T) {
		for _, uncached := range []bool{false, true} {
			_, err := cs.Get(ctx, &polyopv1alpha1.GetRequest{Kind: configMapKind, Key: key("nope"), Options: &polyopv1alpha1.ReadOptions{Uncached: uncached}})
			code, s := apiStatusOf(err)
			if code != codes.NotFound || s == nil || s.Reason != metav1.StatusReasonNotFound || s.Code != 404 || s.Details == nil || s.Details.Name != "nope" {
				t.Errorf("uncached %v: %v, status %+v; want NOT_FOUND with reason NotFound", uncached, err, s)
			}
		}
	})

	t.Run("a kind the API server does not serve is NotFound without an API status", func(t *testing.T) {
		_, err := cs.Get(ctx, &polyopv1alpha1.GetRequest{Kind: &polyopv1alpha1.GroupVersionKind{Group: "nowhere.example.com", Version: "v1", Kind: "Nothing"}, Key: key("x")})
		if code, s := apiStatusOf(err); code != codes.NotFound || s != nil {
			t.Errorf("%v, status %+v; want NOT_FOUND without an API status", err, s)
		}
	})

	t.Run("creating twice is AlreadyExists; the default field manager is the sidecar's", func(t *testing.T) {
		obj := mustJSON(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "created", "namespace": f.ns}, "data": map[string]any{"k": "v"}})
		resp, err := cs.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMapKind, Key: key("created"), Object: obj})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(resp.GetObject()), `"uid"`) {
			t.Errorf("Create answered %s, want the stored object", resp.GetObject())
		}
		if cm := f.configMap("created"); cm == nil || len(cm.ManagedFields) == 0 || cm.ManagedFields[0].Manager != "polyop-childsidecar" {
			t.Errorf("the created ConfigMap's managed fields are %+v, want manager polyop-childsidecar", cm.ManagedFields)
		}
		_, err = cs.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMapKind, Key: key("created"), Object: obj})
		if code, s := apiStatusOf(err); code != codes.AlreadyExists || s == nil || s.Reason != metav1.StatusReasonAlreadyExists {
			t.Errorf("%v, status %+v; want ALREADY_EXISTS with reason AlreadyExists", err, s)
		}
	})

	t.Run("kind and key address a write: they fill in what the object leaves out, and an object that disagrees is refused", func(t *testing.T) {
		resp, err := cs.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMapKind, Key: key("addressed"), Object: []byte(`{"data":{"k":"v"}}`)})
		if err != nil {
			t.Fatal(err)
		}
		if cm := f.configMap("addressed"); cm == nil || cm.Data["k"] != "v" || !strings.Contains(string(resp.GetObject()), `"kind":"ConfigMap"`) {
			t.Errorf("created %v, answered %s; want ConfigMap addressed with data.k", cm, resp.GetObject())
		}
		resp, err = cs.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMapKind, Key: key(""), Object: []byte(`{"metadata":{"generateName":"gen-"}}`)})
		if err != nil || !strings.Contains(string(resp.GetObject()), `"name":"gen-`) {
			t.Errorf("a create with generateName: %v, answered %s", err, resp.GetObject())
		}
		for name, req := range map[string]*polyopv1alpha1.UpdateRequest{
			"another name":      {Kind: configMapKind, Key: key("addressed"), Object: []byte(`{"metadata":{"name":"other"},"data":{"k":"w"}}`)},
			"another namespace": {Kind: configMapKind, Key: key("addressed"), Object: []byte(`{"metadata":{"namespace":"default"},"data":{"k":"w"}}`)},
			"another kind":      {Kind: configMapKind, Key: key("addressed"), Object: []byte(`{"apiVersion":"v1","kind":"Secret","data":{"k":"dw=="}}`)},
		} {
			_, err := cs.Update(ctx, req)
			code, s := apiStatusOf(err)
			if code != codes.InvalidArgument || s != nil || !strings.Contains(status.Convert(err).Message(), "they must agree") {
				t.Errorf("an update whose object names %s: %v, status %+v; want INVALID_ARGUMENT from the host, naming both", name, err, s)
			}
		}
		if cm := f.configMap("addressed"); cm.Data["k"] != "v" {
			t.Errorf("a refused update wrote data.k = %q", cm.Data["k"])
		}
	})

	t.Run("force is refused on anything but an apply patch", func(t *testing.T) {
		_, err := cs.Patch(ctx, &polyopv1alpha1.PatchRequest{Kind: configMapKind, Key: key("cm1"), Type: polyopv1alpha1.PatchType_PATCH_TYPE_MERGE,
			Patch: []byte(`{"data":{"forced":"yes"}}`), Options: &polyopv1alpha1.WriteOptions{Force: true}})
		if code, s := apiStatusOf(err); code != codes.InvalidArgument || s != nil || !strings.Contains(status.Convert(err).Message(), "PATCH_TYPE_APPLY") {
			t.Errorf("a forced merge patch: %v, status %+v; want INVALID_ARGUMENT from the host naming PATCH_TYPE_APPLY", err, s)
		}
	})

	t.Run("an update with a stale resourceVersion is a Conflict", func(t *testing.T) {
		stale := f.configMap("created")
		stale.APIVersion, stale.Kind = "v1", "ConfigMap"
		fresh := stale.DeepCopy()
		fresh.Data = map[string]string{"k": "fresh"}
		if _, err := cs.Update(ctx, &polyopv1alpha1.UpdateRequest{Kind: configMapKind, Key: key("created"), Object: mustJSON(t, fresh)}); err != nil {
			t.Fatal(err)
		}
		stale.Data = map[string]string{"k": "stale"}
		_, err := cs.Update(ctx, &polyopv1alpha1.UpdateRequest{Kind: configMapKind, Key: key("created"), Object: mustJSON(t, stale)})
		if code, s := apiStatusOf(err); code != codes.Aborted || s == nil || s.Reason != metav1.StatusReasonConflict {
			t.Errorf("%v, status %+v; want ABORTED with reason Conflict", err, s)
		}
		if got := f.configMap("created").Data["k"]; got != "fresh" {
			t.Errorf("data.k = %q after the conflicting update, want fresh", got)
		}
	})

	t.Run("an invalid object is Invalid, with its causes", func(t *testing.T) {
		obj := mustJSON(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "Not_Valid", "namespace": f.ns}})
		_, err := cs.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMapKind, Key: key("Not_Valid"), Object: obj})
		code, s := apiStatusOf(err)
		if code != codes.InvalidArgument || s == nil || s.Reason != metav1.StatusReasonInvalid || s.Details == nil || len(s.Details.Causes) == 0 || s.Details.Causes[0].Field != "metadata.name" {
			t.Errorf("%v, status %+v; want INVALID_ARGUMENT with reason Invalid and a cause on metadata.name", err, s)
		}
	})

	t.Run("a write the API server forbids is PermissionDenied", func(t *testing.T) {
		// envtest runs no namespace controller: a deleted namespace stays
		// terminating, and the API server forbids creating in it.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gone}}
		f.create(ns)
		if err := k8s.Delete(ctx, ns); err != nil {
			t.Fatal(err)
		}
		obj := mustJSON(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "late", "namespace": ns.Name}})
		_, err := cs.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMapKind, Key: &polyopv1alpha1.ObjectKey{Namespace: ns.Name, Name: "late"}, Object: obj})
		if code, s := apiStatusOf(err); code != codes.PermissionDenied || s == nil || s.Reason != metav1.StatusReasonForbidden || !strings.Contains(s.Message, "terminated") {
			t.Errorf("%v, status %+v; want the API server's PERMISSION_DENIED with reason Forbidden", err, s)
		}
	})

	t.Run("a write outside the namespaces the host watches is refused by the host, naming the namespace and the remedy", func(t *testing.T) {
		obj := mustJSON(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": f.ns, "namespace": "kube-system"}})
		_, err := cs.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMapKind, Key: &polyopv1alpha1.ObjectKey{Namespace: "kube-system", Name: f.ns}, Object: obj})
		code, s := apiStatusOf(err)
		if code != codes.PermissionDenied || s == nil || s.Reason != metav1.StatusReasonForbidden {
			t.Fatalf("%v, status %+v; want PERMISSION_DENIED with reason Forbidden", err, s)
		}
		for _, want := range []string{`not in "kube-system"`, f.ns, "--namespace"} {
			if !strings.Contains(s.Message, want) {
				t.Errorf("message %q does not name %q", s.Message, want)
			}
		}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: f.ns}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("the ConfigMap in kube-system: %v, want NotFound", err)
		}
		_, err = cs.Delete(ctx, &polyopv1alpha1.DeleteRequest{Kind: configMapKind, Key: &polyopv1alpha1.ObjectKey{Namespace: "kube-system", Name: f.ns}})
		if code, _ := apiStatusOf(err); code != codes.PermissionDenied {
			t.Errorf("deleting a ConfigMap in kube-system: %v, want PERMISSION_DENIED", err)
		}
	})

	t.Run("a dry run persists nothing", func(t *testing.T) {
		obj := mustJSON(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "dry", "namespace": f.ns}})
		if _, err := cs.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMapKind, Key: key("dry"), Object: obj, Options: &polyopv1alpha1.WriteOptions{DryRun: true}}); err != nil {
			t.Fatal(err)
		}
		if f.configMap("dry") != nil {
			t.Errorf("a dry-run create created the object")
		}
		if _, err := cs.Delete(ctx, &polyopv1alpha1.DeleteRequest{Kind: configMapKind, Key: key("cm2"), Options: &polyopv1alpha1.WriteOptions{DryRun: true}}); err != nil {
			t.Fatal(err)
		}
		if f.configMap("cm2") == nil {
			t.Errorf("a dry-run delete deleted the object")
		}
	})

	t.Run("every patch type, and server-side apply's conflicts and force", func(t *testing.T) {
		f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "patched"}, Data: map[string]string{"base": "0"}})
		patch := func(pt polyopv1alpha1.PatchType, body string, manager string, force bool) error {
			_, err := cs.Patch(ctx, &polyopv1alpha1.PatchRequest{Kind: configMapKind, Key: key("patched"), Type: pt, Patch: []byte(body),
				Options: &polyopv1alpha1.WriteOptions{FieldManager: manager, Force: force}})
			return err
		}
		steps := []struct {
			pt   polyopv1alpha1.PatchType
			body string
		}{
			{polyopv1alpha1.PatchType_PATCH_TYPE_MERGE, `{"data":{"merge":"1"}}`},
			{polyopv1alpha1.PatchType_PATCH_TYPE_JSON, `[{"op":"add","path":"/data/json","value":"2"}]`},
			{polyopv1alpha1.PatchType_PATCH_TYPE_STRATEGIC_MERGE, `{"data":{"strategic":"3"}}`},
			{polyopv1alpha1.PatchType_PATCH_TYPE_APPLY, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"patched"},"data":{"applied":"4"}}`},
		}
		for _, s := range steps {
			if err := patch(s.pt, s.body, "e2e-applier", false); err != nil {
				t.Fatalf("%s: %v", s.pt, err)
			}
		}
		cm := f.configMap("patched")
		for k, v := range map[string]string{"base": "0", "merge": "1", "json": "2", "strategic": "3", "applied": "4"} {
			if cm.Data[k] != v {
				t.Errorf("data[%s] = %q, want %q (data %v)", k, cm.Data[k], v, cm.Data)
			}
		}
		checkManager(t, "ConfigMap patched", cm.ManagedFields, "e2e-applier")

		other := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"patched"},"data":{"applied":"taken"}}`
		err := patch(polyopv1alpha1.PatchType_PATCH_TYPE_APPLY, other, "e2e-rival", false)
		if code, s := apiStatusOf(err); code != codes.Aborted || s == nil || s.Reason != metav1.StatusReasonConflict {
			t.Errorf("applying a field another manager owns: %v, status %+v; want ABORTED with reason Conflict", err, s)
		}
		if err := patch(polyopv1alpha1.PatchType_PATCH_TYPE_APPLY, other, "e2e-rival", true); err != nil {
			t.Errorf("applying with force: %v", err)
		}
		if got := f.configMap("patched").Data["applied"]; got != "taken" {
			t.Errorf("after a forced apply data.applied = %q, want taken", got)
		}

		_, err = cs.Patch(ctx, &polyopv1alpha1.PatchRequest{Kind: widgetKind, Key: key("pointer"), Type: polyopv1alpha1.PatchType_PATCH_TYPE_STRATEGIC_MERGE, Patch: []byte(`{"spec":{"x":1}}`)})
		if code, s := apiStatusOf(err); code != codes.InvalidArgument || s == nil || s.Reason != metav1.StatusReasonUnsupportedMediaType {
			t.Errorf("a strategic merge patch of a custom resource: %v, status %+v; want INVALID_ARGUMENT with reason UnsupportedMediaType", err, s)
		}
	})

	t.Run("status subresource update and patch", func(t *testing.T) {
		// A Widget the host's label selector leaves out, so that no
		// controller writes the status meanwhile; it is read uncached.
		w := f.newWidget("manual", map[string]any{"value": "v"})
		w.SetLabels(map[string]string{manualLabel: "true"})
		f.create(w)
		w.Object["status"] = map[string]any{"phase": "Manual"}
		if _, err := cs.Update(ctx, &polyopv1alpha1.UpdateRequest{Kind: widgetKind, Key: key("manual"), Object: mustJSON(t, w.Object), Subresource: "status"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.Patch(ctx, &polyopv1alpha1.PatchRequest{Kind: widgetKind, Key: key("manual"),
			Type: polyopv1alpha1.PatchType_PATCH_TYPE_MERGE, Patch: []byte(`{"status":{"note":"patched"}}`), Subresource: "status"}); err != nil {
			t.Fatal(err)
		}
		resp, err := cs.Get(ctx, &polyopv1alpha1.GetRequest{Kind: widgetKind, Key: key("manual"), Options: &polyopv1alpha1.ReadOptions{Uncached: true}})
		if err != nil {
			t.Fatal(err)
		}
		got := &unstructured.Unstructured{}
		if err := got.UnmarshalJSON(resp.GetObject()); err != nil {
			t.Fatal(err)
		}
		if statusString(got, "phase") != "Manual" || statusString(got, "note") != "patched" || resp.GetSource() != polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER {
			t.Errorf("status %v from %s, want phase Manual and note patched, from the API server", got.Object["status"], resp.GetSource())
		}
	})

	t.Run("delete preconditions and propagation pass through", func(t *testing.T) {
		cm := f.configMap("cm2")
		_, err := cs.Delete(ctx, &polyopv1alpha1.DeleteRequest{Kind: configMapKind, Key: key("cm2"), PreconditionUid: "00000000-0000-0000-0000-000000000000"})
		if code, s := apiStatusOf(err); code != codes.Aborted || s == nil || s.Reason != metav1.StatusReasonConflict {
			t.Errorf("a stale UID precondition: %v, status %+v; want ABORTED with reason Conflict", err, s)
		}
		_, err = cs.Delete(ctx, &polyopv1alpha1.DeleteRequest{Kind: configMapKind, Key: key("cm2"), PreconditionUid: string(cm.UID),
			PreconditionResourceVersion: cm.ResourceVersion, Propagation: polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_FOREGROUND, GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil {
			t.Fatal(err)
		}
		// envtest has no garbage collector: foreground deletion leaves the
		// object waiting on its foregroundDeletion finalizer.
		if cm := f.configMap("cm2"); cm == nil || cm.DeletionTimestamp == nil || !slices.Contains(cm.Finalizers, metav1.FinalizerDeleteDependents) {
			t.Errorf("after a foreground delete: %+v, want it waiting on %s", cm, metav1.FinalizerDeleteDependents)
		}
	})

	t.Run("RecordEvent records an event regarding the object", func(t *testing.T) {
		_, err := cs.RecordEvent(ctx, &polyopv1alpha1.RecordEventRequest{Kind: configMapKind, Key: key("cm1"), Event: &polyopv1alpha1.Event{
			Type: polyopv1alpha1.EventType_EVENT_TYPE_WARNING, Reason: "Poked", Message: "poked through the cluster service",
		}})
		if err != nil {
			t.Fatal(err)
		}
		uid := f.configMap("cm1").UID
		testenv.Eventually(f.t, time.Minute, "the event is recorded", func() (bool, string) {
			var list eventsv1.EventList
			if err := k8s.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
				return false, err.Error()
			}
			for _, e := range list.Items {
				if e.Reason == "Poked" {
					return e.Regarding.UID == uid && e.Regarding.Kind == "ConfigMap" && e.Type == corev1.EventTypeWarning && e.Action == "Poked" && e.Note == "poked through the cluster service",
						fmt.Sprintf("%+v", e)
				}
			}
			return false, fmt.Sprintf("%d events", len(list.Items))
		})
		_, err = cs.RecordEvent(ctx, &polyopv1alpha1.RecordEventRequest{Kind: configMapKind, Key: key("cm1"), Event: &polyopv1alpha1.Event{}})
		if code, _ := apiStatusOf(err); code != codes.InvalidArgument {
			t.Errorf("an event without a reason: %v, want INVALID_ARGUMENT", err)
		}
	})

	t.Run("ResolveKind maps kinds through discovery", func(t *testing.T) {
		for _, tc := range []struct {
			kind       *polyopv1alpha1.GroupVersionKind
			version    string
			resource   string
			namespaced bool
		}{
			{&polyopv1alpha1.GroupVersionKind{Group: "apps", Kind: "Deployment"}, "v1", "deployments", true},
			{&polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "v1", "namespaces", false},
			{widgetKind, "v1", "widgets", true},
		} {
			resp, err := cs.ResolveKind(ctx, &polyopv1alpha1.ResolveKindRequest{Kind: tc.kind})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetKind().GetVersion() != tc.version || resp.GetResource() != tc.resource || resp.GetNamespaced() != tc.namespaced {
				t.Errorf("%s: %v", tc.kind.GetKind(), resp)
			}
		}
	})

	if out := host.Output(); !contains(out, `"cluster request"`, `"method":"Get"`, `"kind":"ConfigMap.v1"`, `"source":"cache"`, `"source":"api-server"`) {
		t.Errorf("the host does not log cluster requests at V(1) with their kind and source")
	}
}

// apiStatusOf reads a cluster service error: its code, and the API server's
// status when the error carries one.
func apiStatusOf(err error) (codes.Code, *metav1.Status) {
	st, ok := status.FromError(err)
	if !ok {
		return codes.Unknown, nil
	}
	for _, d := range st.Details() {
		if e, ok := d.(*polyopv1alpha1.APIError); ok {
			s := &metav1.Status{}
			if json.Unmarshal(e.GetStatus(), s) != nil {
				return st.Code(), nil
			}
			return st.Code(), s
		}
	}
	return st.Code(), nil
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
