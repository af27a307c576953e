package controller

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/polyop/polyop/internal/object"
)

var (
	configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK    = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	roleGVK      = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
)

func owner() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("e2e.polyop.dev/v1")
	u.SetKind("Widget")
	u.SetNamespace("ns")
	u.SetName("w")
	u.SetUID("owner-uid")
	return u
}

func TestValidateChildren(t *testing.T) {
	t.Parallel()
	kinds := []ChildKind{{GVK: configMapGVK, Namespaced: true}, {GVK: roleGVK}}
	for name, tc := range map[string]struct {
		children []string
		wantErr  []string
		check    func(*testing.T, []desiredChild)
	}{
		"if a child names no namespace, it gets its owner's, and the controller owner reference": {
			children: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`},
			check: func(t *testing.T, got []desiredChild) {
				c := objectOf(t, got[0])
				refs := c.GetOwnerReferences()
				if c.GetNamespace() != "ns" || len(refs) != 1 || refs[0].UID != "owner-uid" || refs[0].Kind != "Widget" ||
					!ptr.Deref(refs[0].Controller, false) || !ptr.Deref(refs[0].BlockOwnerDeletion, false) {
					t.Errorf("child %v, want namespace ns and the owner as controller", c.Object)
				}
			},
		},
		"if a child carries what the API server sets, and a status, they are dropped": {
			children: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"5","uid":"u","managedFields":[{}],"creationTimestamp":"2026-01-01T00:00:00Z"},"status":{"x":1}}`},
			check: func(t *testing.T, got []desiredChild) {
				c := objectOf(t, got[0])
				if c.GetResourceVersion() != "" || c.GetUID() != "" || c.GetManagedFields() != nil || c.Object["status"] != nil {
					t.Errorf("child %v still carries server-set fields", c.Object)
				}
			},
		},
		"if a child keeps another, non-controller owner reference, both stay": {
			children: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"pod-uid"}]}}`},
			check: func(t *testing.T, got []desiredChild) {
				if refs := objectOf(t, got[0]).GetOwnerReferences(); len(refs) != 2 || refs[0].UID != "pod-uid" || refs[1].UID != "owner-uid" {
					t.Errorf("owner references %+v, want the Pod's and the owner's", refs)
				}
			},
		},
		"if a cluster-scoped child names no namespace, it stays cluster-scoped": {
			children: []string{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"}}`},
			check: func(t *testing.T, got []desiredChild) {
				if objectOf(t, got[0]).GetNamespace() != "" {
					t.Errorf("namespace %q, want none", objectOf(t, got[0]).GetNamespace())
				}
			},
		},
		"if the same content comes twice, it hashes the same": {
			children: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"x":"1","y":"2"}}`, `{"kind":"ConfigMap","data":{"y":"2","x":"1"},"apiVersion":"v1","metadata":{"name":"b"}}`},
			check: func(t *testing.T, got []desiredChild) {
				a, b := objectOf(t, got[0]), objectOf(t, got[1])
				b.SetName("a")
				if got[0].hash == (configHash{}) || got[0].hash == got[1].hash {
					t.Errorf("hashes %x and %x: want distinct, non-empty hashes for distinct children", got[0].hash, got[1].hash)
				}
				ha, _ := validateChildren([][]byte{mustJSON(t, a.Object)}, owner(), "widget", kinds)
				hb, _ := validateChildren([][]byte{mustJSON(t, b.Object)}, owner(), "widget", kinds)
				if ha[0].hash != hb[0].hash {
					t.Errorf("the same child in another key order hashes differently")
				}
			},
		},
		"if a child is not JSON, then an error naming its index": {
			children: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, `{"apiVersion":`},
			wantErr:  []string{"desired_children[1]: not valid JSON"},
		},
		"if a child is not an object, then an error": {
			children: []string{`["a"]`},
			wantErr:  []string{"desired_children[0]: not a JSON object"},
		},
		"if a child has no kind, then an error": {
			children: []string{`{"apiVersion":"v1","metadata":{"name":"a"}}`},
			wantErr:  []string{"apiVersion and kind are required"},
		},
		"if a child is of a kind the controller does not own, then an error listing what it owns": {
			children: []string{`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"}}`},
			wantErr:  []string{`Secret "a": Secret.v1 is not a kind the controller owns (it owns ConfigMap.v1, ClusterRole.rbac.authorization.k8s.io/v1)`},
		},
		"if a child is of an owned kind at another version, then an error": {
			children: []string{`{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"a"}}`},
			wantErr:  []string{"ConfigMap.v2 is not a kind the controller owns"},
		},
		"if a child has no name, then an error": {
			children: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"a-"}}`},
			wantErr:  []string{"ConfigMap has no metadata.name"},
		},
		"if a child is in another namespace, then an error": {
			children: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"other"}}`},
			wantErr:  []string{`a child lives in its owner's namespace "ns", not "other"`},
		},
		"if a cluster-scoped child names a namespace, then an error": {
			children: []string{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r","namespace":"ns"}}`},
			wantErr:  []string{"ClusterRole is cluster-scoped"},
		},
		"if a child names another controller, then an error": {
			children: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"pod-uid","controller":true}]}}`},
			wantErr:  []string{`already names Pod "p" as its controller`},
		},
		"if a child comes twice, then an error naming both": {
			children: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns"}}`},
			wantErr:  []string{"desired_children[1]: ConfigMap ns/a is also desired_children[0]"},
		},
		"if several children are bad, then every problem is reported, and none is returned": {
			children: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok"}}`, `[]`, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`},
			wantErr:  []string{"so none was applied", "desired_children[1]", "desired_children[2]"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var raws [][]byte
			for _, c := range tc.children {
				raws = append(raws, []byte(c))
			}
			got, err := validateChildren(raws, owner(), "widget", kinds)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tc.wantErr)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				if got != nil {
					t.Errorf("children returned beside an error: %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.children) {
				t.Fatalf("%d children, want %d", len(got), len(tc.children))
			}
			tc.check(t, got)
		})
	}
}

func TestHolds(t *testing.T) {
	t.Parallel()
	parse := func(s string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(s)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	const ref = `"ownerReferences":[{"apiVersion":"x/v1","kind":"W","name":"w","uid":"u1","controller":true}]`
	desired := parse(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a",` + ref + `,"labels":{"l":"1"}},"data":{"k":"v","n":3},"list":[{"a":1},{"b":2}]}`)
	for name, tc := range map[string]struct {
		observed string
		want     bool
	}{
		"if the observed child has every desired field, and more, it holds": {
			observed: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","uid":"c","resourceVersion":"9",` + ref + `,"labels":{"l":"1","other":"x"}},"data":{"k":"v","n":3,"extra":"e"},"list":[{"a":1,"z":0},{"b":2}]}`,
			want:     true,
		},
		"if a number decoded as a float equals, it holds": {
			observed: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a",` + ref + `,"labels":{"l":"1"}},"data":{"k":"v","n":3.0},"list":[{"a":1},{"b":2}]}`,
			want:     true,
		},
		"if a desired value differs, it does not hold": {
			observed: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a",` + ref + `,"labels":{"l":"1"}},"data":{"k":"tampered","n":3},"list":[{"a":1},{"b":2}]}`,
		},
		"if a desired field is missing, it does not hold": {
			observed: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a",` + ref + `},"data":{"k":"v","n":3},"list":[{"a":1},{"b":2}]}`,
		},
		"if a list has another length, it does not hold": {
			observed: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a",` + ref + `,"labels":{"l":"1"}},"data":{"k":"v","n":3},"list":[{"a":1}]}`,
		},
		"if the owner reference is missing, it does not hold": {
			observed: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"l":"1"}},"data":{"k":"v","n":3},"list":[{"a":1},{"b":2}]}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := holds(parse(tc.observed), desired); got != tc.want {
				t.Errorf("holds = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnchangedTrustsItsOwnApplyOverAStaleCache(t *testing.T) {
	t.Parallel()
	desired := desiredChild{raw: []byte(`{"data":{"k":"new"}}`)}
	observed := object.New(configMapGVK)
	if err := json.Unmarshal([]byte(`{"metadata":{"name":"a"},"data":{"k":"old"}}`), observed); err != nil {
		t.Fatal(err)
	}
	observed.SetResourceVersion("10")
	if !unchanged(observed, desired, "12") {
		t.Errorf("a cache older than the host's own apply asked for another apply")
	}
	if !unchanged(observed, desired, "10") {
		t.Errorf("the version the host's own apply wrote was applied again")
	}
	observed.SetResourceVersion("15")
	if unchanged(observed, desired, "12") {
		t.Errorf("a child changed after the host's apply was left alone")
	}
	if unchanged(nil, desired, "12") {
		t.Errorf("a child that is not observed was left alone")
	}
}

func TestOwnerUIDIndexesTheControllerReferenceOnly(t *testing.T) {
	t.Parallel()
	u := &unstructured.Unstructured{}
	if got := ownerUID(u); got != nil {
		t.Errorf("no owner: %v", got)
	}
	u.SetOwnerReferences([]metav1.OwnerReference{{UID: "other"}, {UID: "ctrl", Controller: ptr.To(true)}})
	if got := ownerUID(u); len(got) != 1 || got[0] != "ctrl" {
		t.Errorf("ownerUID = %v, want [ctrl]", got)
	}
}

func TestAppliedStateForgetsAnotherObjectOfTheSameName(t *testing.T) {
	t.Parallel()
	s := newAppliedState()
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	id := childID{gvk: configMapGVK, namespace: "ns", name: "a"}
	s.record(key, "uid-1", []appliedChild{{id: id, hash: configHash{1}, resourceVersion: "1"}})
	if got, _ := findApplied(s.children(key, "uid-1"), id); got.hash != (configHash{1}) {
		t.Errorf("hash %x, want configHash{1}", got.hash)
	}
	if got := s.children(key, "uid-2"); got != nil {
		t.Errorf("a recreated owner inherited %v", got)
	}
	s.forget(key)
	if got := s.children(key, "uid-1"); got != nil {
		t.Errorf("after forget: %v", got)
	}
}

func TestOwnerIndexKeys(t *testing.T) {
	t.Parallel()
	clusterOwner := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Cluster"}
	index := ownerIndexFunc(map[schema.GroupKind]bool{clusterOwner.GroupKind(): true})
	child := func(namespace string, owner schema.GroupVersionKind, controller bool) *object.Object {
		o := object.New(configMapGVK)
		o.SetNamespace(namespace)
		o.SetName("c")
		apiVersion, kind := owner.ToAPIVersionAndKind()
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "o", UID: "uid-1", Controller: ptr.To(controller)}})
		return o
	}
	for name, tc := range map[string]struct {
		obj  any
		want []string
	}{
		"if a namespaced owner controls it, then its namespace's key only": {obj: child("ns", widgetGVK, true), want: []string{"ns/uid-1"}},
		"if a cluster-scoped owner controls it, then the all-namespaces key too": {
			obj: child("ns", clusterOwner, true), want: []string{"ns/uid-1", "__all_namespaces/uid-1"},
		},
		"if the child is cluster-scoped, then the all-namespaces key":   {obj: child("", clusterOwner, true), want: []string{"__all_namespaces/uid-1"}},
		"if the owner reference is not a controller's, then no key":     {obj: child("ns", widgetGVK, false)},
		"if it is not an object (a tombstone, say), then no key either": {obj: "ns/c"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := index(tc.obj)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("keys %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// objectOf is the configuration of c, decoded.
func objectOf(tb testing.TB, c desiredChild) *unstructured.Unstructured {
	tb.Helper()
	u, err := c.object()
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// A child's configuration is applied as validateChildren made it, and of the
// answer only the resourceVersion is kept.
func TestChildConfigurationSendsItsJSONAndReadsTheResourceVersion(t *testing.T) {
	t.Parallel()
	got, err := validateChildren([][]byte{[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`)},
		owner(), "widget", []ChildKind{{GVK: configMapGVK, Namespaced: true}})
	if err != nil {
		t.Fatal(err)
	}
	c := got[0].configuration()
	if *c.GetAPIVersion() != "v1" || *c.GetKind() != "ConfigMap" || *c.GetNamespace() != "ns" || *c.GetName() != "a" {
		t.Errorf("the configuration names %s %s %s/%s, want v1 ConfigMap ns/a", *c.GetAPIVersion(), *c.GetKind(), *c.GetNamespace(), *c.GetName())
	}
	body, err := json.Marshal(c)
	if err != nil || string(body) != string(got[0].raw) {
		t.Errorf("body %s (%v), want %s", body, err, got[0].raw)
	}
	answer := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"42","managedFields":[{"manager":"polyop/widget"}]},"data":{"k":"v"}}`
	if err := json.Unmarshal([]byte(answer), c); err != nil || c.resourceVersion != "42" {
		t.Errorf("resourceVersion %q (%v), want 42", c.resourceVersion, err)
	}
	if err := json.Unmarshal([]byte(`{"metadata":{"resourceVersion":7}}`), c); err == nil || !strings.Contains(err.Error(), "ConfigMap ns/a") {
		t.Errorf("an answer with a resourceVersion that is not a string: %v, want an error naming the child", err)
	}
}
