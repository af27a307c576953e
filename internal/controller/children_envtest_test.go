package controller

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/object"
)

// childrenOf makes a Gadget in a namespace of its own and a Reconciler of
// Gadgets owning ConfigMaps, writing through a counted client that reads
// from the API server.
func childrenOf(tb testing.TB) (*Reconciler, *object.Object, client.Client, *requestCounter) {
	tb.Helper()
	ns := testNamespace(tb)
	c, counter := countingClient(tb, envScheme(gadgetGVK, configMapGVK), nil)
	g := object.New(gadgetGVK)
	if err := g.UnmarshalJSON([]byte(`{"apiVersion":"envtest.polyop.dev/v1","kind":"Gadget","metadata":{"namespace":"` + ns + `","name":"g"}}`)); err != nil {
		tb.Fatal(err)
	}
	if err := c.Create(context.Background(), g); err != nil {
		tb.Fatal(err)
	}
	g.SetGroupVersionKind(gadgetGVK)
	r := NewReconciler(description.Controller{Name: "gadgets", GVK: gadgetGVK}, c, &fakesidecar.Fake{}, ReconcilerOptions{
		Children: []ChildKind{{GVK: configMapGVK, Namespaced: true}},
	})
	return r, g, c, counter
}

func configMapChild(name string, data map[string]string) []byte {
	raw, _ := (&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": toAny(data),
	}}).MarshalJSON()
	return raw
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ownedData returns the data keys each manager of cm owns, by manager and
// operation.
func ownedData(t *testing.T, cm *corev1.ConfigMap) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range cm.ManagedFields {
		var fields map[string]any
		if err := jsonUnmarshal(f.FieldsV1.GetRawBytes(), &fields); err != nil {
			t.Fatal(err)
		}
		data, _ := fields["f:data"].(map[string]any)
		var keys []string
		for k := range data {
			if k != "." {
				keys = append(keys, strings.TrimPrefix(k, "f:"))
			}
		}
		out[f.Manager+" "+string(f.Operation)] = sortedStrings(keys)
	}
	return out
}

// TestAChildsFirstWriteKeepsServerSideApplyOwnership proves that the host's
// first write of a child, which the cache shows absent, leaves the same field
// ownership as every later apply: a later answer that omits a field the first
// set removes it, and the controller's field manager is the one Apply
// manager and owns exactly the fields applied. A create (POST, with the
// field manager) would not: it records an Update manager, which keeps owning
// what it created, so that the later apply cannot remove it. That is why the
// host writes a new child with server-side apply, though a create costs the
// API server less (BenchmarkFirstWriteOfAChild).
func TestAChildsFirstWriteKeepsServerSideApplyOwnership(t *testing.T) {
	r, g, _, _ := childrenOf(t)
	ctx := context.Background()
	plain := plainClient(t)
	read := func(t *testing.T, name string) *corev1.ConfigMap {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := plain.Get(ctx, client.ObjectKey{Namespace: g.GetNamespace(), Name: name}, cm); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	apply := func(t *testing.T, name string, data map[string]string) {
		t.Helper()
		desired, err := validateChildren([][]byte{configMapChild(name, data)}, g, r.Controller.Name, r.Children)
		if err != nil {
			t.Fatal(err)
		}
		if res := r.applyChildren(ctx, g, desired, nil, false); res.err() != nil {
			t.Fatal(res.err())
		}
	}

	t.Run("if the host writes a new child, then a later apply that omits a field removes it", func(t *testing.T) {
		apply(t, "applied", map[string]string{"a": "1", "b": "2"})
		apply(t, "applied", map[string]string{"a": "1"})
		cm := read(t, "applied")
		if _, ok := cm.Data["b"]; ok || cm.Data["a"] != "1" {
			t.Errorf("data %v, want a alone", cm.Data)
		}
		if got := fmt.Sprint(ownedData(t, cm)); got != "map[polyop/gadgets Apply:[a]]" {
			t.Errorf("managers and the data they own: %s, want polyop/gadgets, Apply, owning a alone", got)
		}
		if cm.Labels[ControllerLabel] != "gadgets" || len(cm.OwnerReferences) != 1 {
			t.Errorf("labels %v, owner references %v", cm.Labels, cm.OwnerReferences)
		}
	})

	t.Run("if a child were created instead, then a later apply could not remove a field it set", func(t *testing.T) {
		first := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: g.GetNamespace(), Name: "created"}, Data: map[string]string{"a": "1", "b": "2"}}
		if err := plain.Create(ctx, first, client.FieldOwner(r.fieldManager())); err != nil {
			t.Fatal(err)
		}
		r.Children[0].Adopt = true // the created object has no owner yet
		apply(t, "created", map[string]string{"a": "1"})
		cm := read(t, "created")
		t.Logf("after a create and an apply: data %v, managers %v", cm.Data, ownedData(t, cm))
		if _, ok := cm.Data["b"]; !ok {
			t.Errorf("the apply removed b: a create keeps server-side apply's semantics after all, and the host could create new children (see BenchmarkFirstWriteOfAChild)")
		}
	})
}

// TestTheChildOfAnEarlierOwnerIsRefusedUntilTheCommandTheErrorGivesDeletesIt
// plays polyop run's local API server, which has no garbage collector: a
// Gadget is deleted and created again with its name, its child stays behind
// controlled by the deleted one, and the host refuses it until the kubectl
// command its error gives deletes it; then it applies it as the new Gadget's.
func TestTheChildOfAnEarlierOwnerIsRefusedUntilTheCommandTheErrorGivesDeletesIt(t *testing.T) {
	r, g, c, _ := childrenOf(t)
	ctx := context.Background()
	apply := func(owner client.Object) error {
		t.Helper()
		desired, err := validateChildren([][]byte{configMapChild("cm", map[string]string{"a": "1"})}, owner, r.Controller.Name, r.Children)
		if err != nil {
			t.Fatal(err)
		}
		return r.applyChildren(ctx, owner, desired, nil, false).err()
	}
	if err := apply(g); err != nil {
		t.Fatal(err)
	}
	earlier, ns := g.GetUID(), g.GetNamespace()
	if err := c.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	g = object.New(gadgetGVK)
	if err := g.UnmarshalJSON([]byte(`{"apiVersion":"envtest.polyop.dev/v1","kind":"Gadget","metadata":{"namespace":"` + ns + `","name":"g"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	g.SetGroupVersionKind(gadgetGVK)
	err := apply(g)
	want := fmt.Sprintf("desired child ConfigMap %s/cm is controlled by an earlier Gadget/g (uid %s), not by this one (uid %s)", g.GetNamespace(), earlier, g.GetUID())
	_, command, found := strings.Cut(fmt.Sprint(err), "has no garbage collector), delete it: ")
	if err == nil || !strings.Contains(err.Error(), want) || !found {
		t.Fatalf("the apply over the earlier Gadget's child: %v, want it to say %q and give the command that deletes it", err, want)
	}

	env := controlPlane(t)
	args := strings.Fields(command)
	if args[0] != "kubectl" {
		t.Fatalf("the command %q is no kubectl", command)
	}
	out, err := exec.CommandContext(ctx, env.Kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args[1:]...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	if err := apply(g); err != nil {
		t.Fatalf("the apply once the child is deleted: %v", err)
	}
	cm := &corev1.ConfigMap{}
	if err := plainClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm"}, cm); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(cm); ref == nil || ref.UID != g.GetUID() {
		t.Errorf("the child's controller is %v, want the new Gadget (uid %s)", cm.OwnerReferences, g.GetUID())
	}
}

// BenchmarkFirstWriteOfAChild writes new ConfigMaps, as the host writes a
// child the cache shows absent, by server-side apply (what the host does)
// and by create, and reports the API server's CPU per write (its
// process_cpu_seconds_total) beside the latency. Run both in one run:
//
//	go test ./internal/controller -run '^$' -bench FirstWriteOfAChild -count 6
func BenchmarkFirstWriteOfAChild(b *testing.B) {
	r, g, c, _ := childrenOf(b)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(controlPlane(b).Config)
	n := 0
	next := func(prefix string) []byte {
		n++
		return configMapChild(fmt.Sprintf("%s-%d", prefix, n), map[string]string{"a": "1", "b": strings.Repeat("x", 200)})
	}
	for _, write := range []struct {
		name  string
		write func(raw []byte) error
	}{
		{"apply", func(raw []byte) error {
			desired, err := validateChildren([][]byte{raw}, g, r.Controller.Name, r.Children)
			if err != nil {
				return err
			}
			_, _, p := r.applyChild(ctx, g, desired[0], nil, "")
			if p != nil {
				return p.err
			}
			return nil
		}},
		{"create", func(raw []byte) error {
			desired, err := validateChildren([][]byte{raw}, g, r.Controller.Name, r.Children)
			if err != nil {
				return err
			}
			return c.Create(ctx, objectOf(b, desired[0]), client.FieldOwner(r.fieldManager()))
		}},
	} {
		b.Run(write.name, func(b *testing.B) {
			before := apiServerCPU(b, cs)
			for b.Loop() {
				if err := write.write(next(write.name)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((apiServerCPU(b, cs)-before)*1e6/float64(b.N), "apiserver-µs/op")
		})
	}
}

// BenchmarkApplyChildren applies an answer of 8 changed ConfigMaps, one
// after the other and 4 at a time (the default of
// --max-concurrent-child-writes).
func BenchmarkApplyChildren(b *testing.B) {
	for _, limit := range []int{1, 4} {
		b.Run(fmt.Sprintf("concurrency=%d", limit), func(b *testing.B) {
			r, g, c, _ := childrenOf(b)
			r.maxConcurrentChildWrites = limit
			ctx := context.Background()
			answer := func(v int) []desiredChild {
				var raws [][]byte
				for i := range 8 {
					raws = append(raws, configMapChild(fmt.Sprintf("c%d", i), map[string]string{"v": strconv.Itoa(v)}))
				}
				desired, err := validateChildren(raws, g, r.Controller.Name, r.Children)
				if err != nil {
					b.Fatal(err)
				}
				return desired
			}
			if res := r.applyChildren(ctx, g, answer(0), nil, false); res.err() != nil {
				b.Fatal(res.err())
			}
			list := object.NewList(configMapGVK)
			if err := c.List(ctx, list, client.InNamespace(g.GetNamespace())); err != nil {
				b.Fatal(err)
			}
			var observed []*object.Object
			for i := range list.Items {
				list.Items[i].SetGroupVersionKind(configMapGVK)
				observed = append(observed, &list.Items[i])
			}
			v := 0
			for b.Loop() {
				v++
				desired := answer(v)
				if res := r.applyChildren(ctx, g, desired, observed, false); res.err() != nil || res.applied != 8 {
					b.Fatalf("applied %d: %v", res.applied, res.err())
				}
			}
		})
	}
}

// apiServerCPU reads the API server's process_cpu_seconds_total.
func apiServerCPU(tb testing.TB, cs kubernetes.Interface) float64 {
	tb.Helper()
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return f
		}
	}
	tb.Fatal("the API server serves no process_cpu_seconds_total")
	return 0
}
