package render

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

var configMapKind = &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func TestRenderServesTheGivenObjectsThroughTheClusterServiceAndRecordsWritesWithoutApplyingThem(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		results = map[string]error{}
		got     = map[string]string{}
		address string
	)
	f := &fakesidecar.Fake{}
	f.OnReconcile = func(ctx context.Context, _ *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
		d := f.Describes()
		if len(d) == 0 {
			t.Error("Reconcile before Describe")
			return &polyopv1alpha1.ReconcileResponse{}, nil
		}
		conn, err := grpc.NewClient(d[0].GetClusterAddress(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Error(err)
			return &polyopv1alpha1.ReconcileResponse{}, nil
		}
		defer func() { _ = conn.Close() }()
		c := polyopv1alpha1.NewClusterServiceClient(conn)
		get := func(label string, kind *polyopv1alpha1.GroupVersionKind, name string) {
			resp, err := c.Get(ctx, &polyopv1alpha1.GetRequest{Kind: kind, Key: &polyopv1alpha1.ObjectKey{Namespace: "default", Name: name}})
			mu.Lock()
			defer mu.Unlock()
			results[label], got[label] = err, string(resp.GetObject())
		}
		list, err := c.List(ctx, &polyopv1alpha1.ListRequest{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Namespace"}})
		mu.Lock()
		results["list namespaces"] = err
		got["list namespaces"] = fmt.Sprint(len(list.GetItems()))
		mu.Unlock()
		get("settings", configMapKind, "settings")
		get("missing", configMapKind, "missing")
		get("widget", widgetKind, "w")
		_, err = c.Create(ctx, &polyopv1alpha1.CreateRequest{Kind: configMapKind, Key: &polyopv1alpha1.ObjectKey{Namespace: "default", Name: "made"},
			Object: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"made"},"data":{"k":"v"}}`)})
		mu.Lock()
		results["create"] = err
		mu.Unlock()
		_, err = c.Patch(ctx, &polyopv1alpha1.PatchRequest{Kind: configMapKind, Key: &polyopv1alpha1.ObjectKey{Namespace: "default", Name: "settings"},
			Type: polyopv1alpha1.PatchType_PATCH_TYPE_MERGE, Patch: []byte(`{"data":{"color":"red"}}`)})
		mu.Lock()
		results["patch"] = err
		mu.Unlock()
		_, err = c.Delete(ctx, &polyopv1alpha1.DeleteRequest{Kind: configMapKind, Key: &polyopv1alpha1.ObjectKey{Namespace: "default", Name: "settings"}})
		mu.Lock()
		results["delete"] = err
		mu.Unlock()
		// Nothing was applied: the ConfigMap is as given, and the one
		// created does not exist.
		get("settings after", configMapKind, "settings")
		get("made after", configMapKind, "made")
		mu.Lock()
		address = d[0].GetClusterAddress()
		mu.Unlock()
		return &polyopv1alpha1.ReconcileResponse{}, nil
	}
	objects := writeFile(t, "objects.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  color: blue
`)
	out, _, err := render(t, f, RenderOptions{ObjectFile: writeFile(t, "w.yaml", widgetYAML), ClusterObjectsFile: objects})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got["list namespaces"] != "0" {
		t.Errorf("List of Namespaces, none given: %s items; want none", got["list namespaces"])
	}
	for _, label := range []string{"list namespaces", "settings", "widget", "create", "patch", "delete", "settings after"} {
		if results[label] != nil {
			t.Errorf("%s: %v", label, results[label])
		}
	}
	if !strings.Contains(got["settings"], `"color":"blue"`) {
		t.Errorf("Get of the ConfigMap of --cluster-objects = %s; want its data", got["settings"])
	}
	if !strings.Contains(got["widget"], `"size":3`) {
		t.Errorf("Get of the rendered object = %s; want it", got["widget"])
	}
	for _, label := range []string{"missing", "made after"} {
		if status.Code(results[label]) != codes.NotFound {
			t.Errorf("Get of a ConfigMap not given (%s): %v; want NotFound", label, results[label])
		}
	}
	if !strings.Contains(got["settings after"], `"color":"blue"`) {
		t.Errorf("Get after the patch and the delete = %s; want the ConfigMap as given: writes are not applied", got["settings after"])
	}
	assertContains(t, out,
		"writes:\n- verb: create\n  apiVersion: v1\n  kind: ConfigMap\n  name: default/made\n  object:\n",
		"- verb: patch\n  apiVersion: v1\n  kind: ConfigMap\n  name: default/settings\n  patchType: application/merge-patch+json\n  patch:\n    data:\n      color: red\n",
		"- verb: delete\n  apiVersion: v1\n  kind: ConfigMap\n  name: default/settings\n",
	)
	if _, err := os.Stat(strings.TrimPrefix(address, "unix://")); !os.IsNotExist(err) {
		t.Errorf("the Cluster service's socket %s is left behind: %v", address, err)
	}
}

func assertContains(t *testing.T, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("output lacks %q; it is:\n%s", w, s)
		}
	}
}
