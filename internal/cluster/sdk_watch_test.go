package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"

	polyopclient "github.com/polyop/polyop/sdk/go/client"
)

// sdkWatch watches the ConfigMaps of ns through the Go SDK's client.Watch.
func sdkWatch(t *testing.T, ctx context.Context, s *Server, ns string) <-chan polyopclient.Event {
	t.Helper()
	c, err := polyopclient.New(polyopclient.Options{Address: s.Address()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	events, err := c.Watch(ctx, &corev1.ConfigMapList{}, ctrlclient.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// nextEvent is the SDK watch's next event as "Type name".
func nextEvent(t *testing.T, events <-chan polyopclient.Event) string {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			return "closed"
		}
		switch {
		case ev.Err != nil:
			return fmt.Sprintf("%s %v", ev.Type, ev.Err)
		case ev.Object == nil:
			return string(ev.Type)
		}
		if _, typed := ev.Object.(*corev1.ConfigMap); !typed {
			t.Errorf("%s %s is a %T, want a *corev1.ConfigMap", ev.Type, ev.Object.GetName(), ev.Object)
		}
		return string(ev.Type) + " " + ev.Object.GetName()
	case <-time.After(30 * time.Second):
		t.Fatal("no event from the SDK's watch within 30s")
		return ""
	}
}

func TestTheSDKWatchDeliversTypedEvents(t *testing.T) {
	s, _, c, ns := watchServer(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Create(ctx, configMapIn(ns, "a", nil)); err != nil {
		t.Fatal(err)
	}
	events := sdkWatch(t, ctx, s, ns)
	// a is in the initial list, or comes right after it.
	first := []string{nextEvent(t, events), nextEvent(t, events)}
	if strings.Join(first, ",") != "Added a,Synced" && strings.Join(first, ",") != "Synced,Added a" {
		t.Fatalf("first events %q, want Added a and Synced", first)
	}
	if err := c.Delete(ctx, configMapIn(ns, "a", nil)); err != nil {
		t.Fatal(err)
	}
	if got := nextEvent(t, events); got != "Deleted a" {
		t.Fatalf("got %s, want Deleted a", got)
	}
	cancel()
	for range events {
	}
}

func TestTheSDKWatchRelistsWhenItFellTooFarBehind(t *testing.T) {
	s, cs, c, ns := watchServer(t, Options{WatchBuffer: 10, WatchHistory: 5})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Create(ctx, configMapIn(ns, "gone", nil)); err != nil {
		t.Fatal(err)
	}
	events := sdkWatch(t, ctx, s, ns)
	for seen := map[string]bool{}; !seen["Synced"] || !seen["Added gone"]; {
		seen[nextEvent(t, events)] = true
	}
	// The receiver stops reading: large ConfigMaps fill the flow control
	// window and then the host's buffer, and the host cuts the stream off.
	big := strings.Repeat("x", 100_000)
	created := 0
	for ; s.watchers() > 0; created++ {
		if created == 200 {
			t.Fatal("200 large ConfigMaps later, the stream that reads nothing is still served")
		}
		cm := configMapIn(ns, fmt.Sprintf("big-%d", created), nil)
		cm.Data = map[string]string{"x": big}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	// Meanwhile "gone" goes, and more than the host's five remembered
	// changes happen, so that resuming fails and the watch relists.
	if err := c.Delete(ctx, configMapIn(ns, "gone", nil)); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := c.Create(ctx, configMapIn(ns, fmt.Sprintf("later-%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	// Once the host has seen those changes, reading again, the receiver gets what was under way, then the relist:
	// every object, "gone" Deleted, then Synced; all 6 later ones are there.
	testenv.Eventually(t, 30*time.Second, "the host sees the delete and the last create", func() (bool, string) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		gone := watch(t, wctx, cs, &polyopv1alpha1.WatchRequest{Namespace: ns, FieldSelector: "metadata.name=gone"})
		last := watch(t, wctx, cs, &polyopv1alpha1.WatchRequest{Namespace: ns, FieldSelector: "metadata.name=later-5"})
		g, _ := gone.next(t)
		l, _ := last.next(t)
		return g == "INITIAL_LIST_DONE" && l == "ADDED later-5", g + ", " + l
	})
	seen := map[string]bool{}
	for {
		ev := nextEvent(t, events)
		seen[ev] = true
		if ev == "Synced" {
			break
		}
		if ev == "closed" || strings.HasPrefix(ev, "Error") {
			t.Fatalf("the watch ended: %s", ev)
		}
	}
	if !seen["Deleted gone"] {
		t.Errorf("the relist did not report the deleted ConfigMap: saw %v", keys(seen))
	}
	for i := range 6 {
		name := fmt.Sprintf("later-%d", i)
		if !seen["Added "+name] {
			t.Errorf("the relist did not deliver %s: saw %v", name, keys(seen))
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return sorted(out)
}

func TestTheSDKListsByAGoIndexFuncFromItsOwnCopy(t *testing.T) {
	s, _, c, ns := watchServer(t, Options{})
	ctx := context.Background()
	sdk, err := polyopclient.New(polyopclient.Options{Address: s.Address()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sdk.Close() })
	// A Go func the host could not run: the owner written in the data.
	if err := sdk.IndexField(ctx, &corev1.ConfigMap{}, ".data.owner", func(o ctrlclient.Object) []string {
		if owner := o.(*corev1.ConfigMap).Data["owner"]; owner != "" {
			return []string{owner}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, owner := range map[string]string{"a": "x", "b": "x", "c": "y"} {
		cm := configMapIn(ns, name, nil)
		cm.Data = map[string]string{"owner": owner}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	owned := func(owner string) func() (bool, string) {
		return func() (bool, string) {
			var list corev1.ConfigMapList
			if err := sdk.List(ctx, &list, ctrlclient.InNamespace(ns), ctrlclient.MatchingFields{".data.owner": owner}); err != nil {
				return false, err.Error()
			}
			var names []string
			for _, cm := range list.Items {
				names = append(names, cm.Name)
			}
			return true, strings.Join(sorted(names), ",")
		}
	}
	equals := func(want string, f func() (bool, string)) func() (bool, string) {
		return func() (bool, string) {
			ok, got := f()
			return ok && got == want, got
		}
	}
	testenv.Eventually(t, 30*time.Second, "owner x lists a and b", equals("a,b", owned("x")))
	testenv.Eventually(t, 30*time.Second, "owner y lists c", equals("c", owned("y")))

	b := &corev1.ConfigMap{}
	if err := c.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "b"}, b); err != nil {
		t.Fatal(err)
	}
	b.Data["owner"] = "y"
	if err := c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, configMapIn(ns, "c", nil)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "owner x lists a alone", equals("a", owned("x")))
	testenv.Eventually(t, 30*time.Second, "owner y lists b alone", equals("b", owned("y")))
}
