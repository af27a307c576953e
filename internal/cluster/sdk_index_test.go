package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"

	polyopclient "github.com/polyop/polyop/sdk/go/client"
)

// startHost serves the Cluster service at address from a cache of its own,
// as a host process does, caching ConfigMaps in namespaces (nil: every
// one), and returns what stops it, waiting until it has.
func startHost(t *testing.T, address string, namespaces []string) (stop func()) {
	t.Helper()
	e, _ := controlPlane(t)
	mapper, informers := configMapCache(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	cacheDone := make(chan struct{})
	go func() { defer close(cacheDone); _ = informers.Start(ctx) }()
	opts := Options{CachedKinds: map[schema.GroupVersionKind][]string{configMapGVK: namespaces}}
	s := New(Clients{Cache: informers, Mapper: mapper, Informers: informers}, opts)
	if err := s.Listen(address); err != nil {
		cancel()
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = s.Start(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-served
			<-cacheDone
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestTheSDKsLocalIndexRecoversWhenTheHostRestarts(t *testing.T) {
	_, c := controlPlane(t)
	ctx := context.Background()
	ns := fmt.Sprintf("local-index-%d", time.Now().UnixNano())
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	owned := func(name, owner string) *corev1.ConfigMap {
		yes := true
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Owner", Name: owner, UID: types.UID("uid-" + owner), Controller: &yes}}}}
	}
	for _, cm := range []*corev1.ConfigMap{owned("a", "x"), owned("b", "y")} {
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}

	// A host that caches ConfigMaps in another namespace only.
	address := "unix://" + filepath.Join(t.TempDir(), "cluster.sock")
	stop := startHost(t, address, []string{"elsewhere"})

	sdk, err := polyopclient.New(polyopclient.Options{Address: address})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sdk.Close() })
	if err := sdk.IndexField(ctx, &corev1.ConfigMap{}, "owner", func(obj ctrlclient.Object) []string {
		if ref := metav1.GetControllerOf(obj); ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	listed := func(ctx context.Context) ([]string, error) {
		var list corev1.ConfigMapList
		if err := sdk.List(ctx, &list, ctrlclient.InNamespace(ns), ctrlclient.MatchingFields{"owner": "x"}); err != nil {
			return nil, err
		}
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		slices.Sort(names)
		return names, nil
	}
	eventuallyListed := func(what string, want ...string) {
		t.Helper()
		testenv.Eventually(t, 2*time.Minute, what, func(ctx context.Context) error {
			got, err := listed(ctx)
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("listed %q, want %q", got, want)
			}
			return nil
		})
	}

	// The List fails at once, naming the remedy.
	listCtx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err = listed(listCtx)
	cancel()
	if err == nil || errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "the host caches ConfigMap in namespaces elsewhere only, not in namespace "+ns) ||
		!strings.Contains(err.Error(), "declare ConfigMap for cached reads with sidecar.Server.CacheKind (its Namespaces option") {
		t.Fatalf("a List by the index in a namespace the host does not cache: got %v, want an error at once naming the remedy", err)
	}

	// The host restarts, now caching ConfigMaps in every namespace (the
	// sidecar declared them so): the copy watches again and lists.
	stop()
	stop = startHost(t, address, nil)
	eventuallyListed("a List by the index, once the restarted host caches ConfigMaps", "a")

	// The host restarts again; meanwhile a ConfigMap comes and one goes.
	// The copy's resume is refused by the new host, which remembers nothing,
	// and it lists again.
	stop()
	if err := c.Create(ctx, owned("c", "x")); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, owned("a", "x")); err != nil {
		t.Fatal(err)
	}
	startHost(t, address, nil)
	eventuallyListed("a List by the index, once the host restarted", "c")
	if err := c.Create(ctx, owned("d", "x")); err != nil {
		t.Fatal(err)
	}
	eventuallyListed("a List by the index, after a change", "c", "d")
}
