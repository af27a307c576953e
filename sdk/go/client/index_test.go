package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/sdk/go/client"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// watchServer is a Cluster service whose Watch serves the ConfigMaps it
// holds, as the host does (the objects, INITIAL_LIST_DONE, then every
// change), and which the test can make refuse every Watch, or cut the open
// streams off.
type watchServer struct {
	polyopv1alpha1.UnimplementedClusterServiceServer

	mu      sync.Mutex
	objects map[string]*corev1.ConfigMap
	rv      int
	// since is the oldest version a Watch can resume from.
	since int
	// refuse, when set, fails every Watch at once.
	refuse error
	// streams are the open Watches, each ended by sending on its channel.
	streams map[chan *polyopv1alpha1.WatchResponse]chan error
	watches int
}

// newWatchServer serves a watchServer holding objs on a unix socket and
// returns it with a Client dialing it.
func newWatchServer(t *testing.T, objs ...*corev1.ConfigMap) (*watchServer, *client.Client) {
	t.Helper()
	w := &watchServer{objects: map[string]*corev1.ConfigMap{}, streams: map[chan *polyopv1alpha1.WatchResponse]chan error{}}
	for _, obj := range objs {
		w.rv++
		obj.ResourceVersion = strconv.Itoa(w.rv)
		w.objects[obj.Name] = obj
	}
	return w, serveCluster(t, w)
}

// serveCluster serves cs on a unix socket and returns a Client dialing it,
// closed before the server stops when the test ends.
func serveCluster(t *testing.T, cs polyopv1alpha1.ClusterServiceServer) *client.Client {
	t.Helper()
	dir, err := os.MkdirTemp("", "pc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "cluster.sock")
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	polyopv1alpha1.RegisterClusterServiceServer(gs, cs)
	go func() { _ = gs.Serve(lis) }()
	c, err := client.New(client.Options{Address: "unix://" + socket})
	if err != nil {
		t.Fatal(err)
	}
	// The Client first, so that its Watches end before the server stops.
	t.Cleanup(gs.Stop)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (w *watchServer) Watch(req *polyopv1alpha1.WatchRequest, stream polyopv1alpha1.ClusterService_WatchServer) error {
	w.mu.Lock()
	w.watches++
	if w.refuse != nil {
		defer w.mu.Unlock()
		return w.refuse
	}
	var initial []*polyopv1alpha1.WatchResponse
	if v := req.GetResourceVersion(); v == "" {
		for _, obj := range w.objects {
			initial = append(initial, watchEvent(polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_ADDED, obj))
		}
		initial = append(initial, &polyopv1alpha1.WatchResponse{
			Type: polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_INITIAL_LIST_DONE, ResourceVersion: strconv.Itoa(w.rv)})
	} else if from, _ := strconv.Atoi(v); from < w.since {
		defer w.mu.Unlock()
		return status.Errorf(codes.FailedPrecondition, "resource version %s of ConfigMap is too old: expired; relist", v)
	}
	ch, end := make(chan *polyopv1alpha1.WatchResponse, 100), make(chan error, 1)
	w.streams[ch] = end
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.streams, ch)
	}()
	for _, resp := range initial {
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	for {
		select {
		case resp := <-ch:
			if err := stream.Send(resp); err != nil {
				return err
			}
		case err := <-end:
			return err
		case <-stream.Context().Done():
			return nil
		}
	}
}

// set adds or changes obj and streams the change.
func (w *watchServer) set(obj *corev1.ConfigMap) {
	w.mu.Lock()
	defer w.mu.Unlock()
	typ := polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED
	if _, ok := w.objects[obj.Name]; !ok {
		typ = polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_ADDED
	}
	w.rv++
	obj.ResourceVersion = strconv.Itoa(w.rv)
	w.objects[obj.Name] = obj
	for ch := range w.streams {
		ch <- watchEvent(typ, obj)
	}
}

// cutOff ends every open Watch with err, after which the server has
// forgotten its history (a resume is refused as expired), deleted the
// objects named gone and added those in added, streaming none of it.
func (w *watchServer) cutOff(err error, gone []string, added ...*corev1.ConfigMap) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, end := range w.streams {
		end <- err
	}
	for _, name := range gone {
		delete(w.objects, name)
	}
	for _, obj := range added {
		w.rv++
		obj.ResourceVersion = strconv.Itoa(w.rv)
		w.objects[obj.Name] = obj
	}
	w.rv++
	w.since = w.rv
}

// refuseWith makes every Watch fail with err, or, with nil, served again.
func (w *watchServer) refuseWith(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refuse = err
}

func watchEvent(typ polyopv1alpha1.WatchEventType, obj *corev1.ConfigMap) *polyopv1alpha1.WatchResponse {
	obj = obj.DeepCopy()
	obj.APIVersion, obj.Kind = "v1", "ConfigMap"
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return &polyopv1alpha1.WatchResponse{Type: typ, Object: raw, ResourceVersion: obj.ResourceVersion}
}

// ownedConfigMap is a ConfigMap in namespace ns controlled by owner.
func ownedConfigMap(name, owner string) *corev1.ConfigMap {
	yes := true
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Owner", Name: owner, UID: types.UID("uid-" + owner), Controller: &yes}}}}
}

// indexByOwner indexes ConfigMaps by their controller's name, as a
// kubebuilder operator indexes its children.
func indexByOwner(t *testing.T, c *client.Client) {
	t.Helper()
	if err := c.IndexField(context.Background(), &corev1.ConfigMap{}, "owner", func(obj ctrlclient.Object) []string {
		if ref := metav1.GetControllerOf(obj); ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// listOwnedBy lists the ConfigMaps of ns controlled by owner, by the index,
// and returns their names, sorted.
func listOwnedBy(ctx context.Context, c *client.Client, owner string) ([]string, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, ctrlclient.InNamespace("ns"), ctrlclient.MatchingFields{"owner": owner}); err != nil {
		return nil, err
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	slices.Sort(names)
	return names, nil
}

// eventuallyListed waits until a List by the index selects want.
func eventuallyListed(t *testing.T, c *client.Client, owner string, want ...string) {
	t.Helper()
	var got []string
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, last = listOwnedBy(ctx, c, owner)
		return last == nil && slices.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("a List by the index never selected %q: last it selected %q, with error %v", want, got, last)
	}
}

func TestAListByALocalIndexFailsClearlyWhileTheHostRefusesTheWatchThenRecovers(t *testing.T) {
	w, c := newWatchServer(t, ownedConfigMap("a", "x"), ownedConfigMap("b", "y"))
	w.refuseWith(status.Error(codes.FailedPrecondition, "the host does not cache ConfigMap in namespace ns"))
	indexByOwner(t, c)

	// Each List fails at once, however long its context, saying what and
	// why and what to do.
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := listOwnedBy(ctx, c, "x")
		cancel()
		if err == nil {
			t.Fatal("a List by the index succeeded while the host refuses the Watch")
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a List by the index waited for its context to end: %v", err)
		}
		for _, says := range []string{`v1 ConfigMap in ns by the index "owner"`, "the host does not cache ConfigMap in namespace ns",
			"FailedPrecondition", "it watches again in", "declare ConfigMap for cached reads with sidecar.Server.CacheKind"} {
			if !strings.Contains(err.Error(), says) {
				t.Errorf("the List's error does not say %q: %v", says, err)
			}
		}
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("the List's error has code %s, want the Watch's FailedPrecondition: %v", status.Code(err), err)
		}
	}

	// Once the host serves the Watch, the copy lists every object and
	// follows the changes.
	w.refuseWith(nil)
	eventuallyListed(t, c, "x", "a")
	w.set(ownedConfigMap("c", "x"))
	eventuallyListed(t, c, "x", "a", "c")
	w.set(ownedConfigMap("a", "y"))
	eventuallyListed(t, c, "x", "c")
}

func TestALocalIndexRelistsAfterACutOffItCannotResumeFrom(t *testing.T) {
	w, c := newWatchServer(t, ownedConfigMap("a", "x"), ownedConfigMap("b", "x"))
	indexByOwner(t, c)
	eventuallyListed(t, c, "x", "a", "b")

	// The host cuts the stream off and forgets the version it could resume
	// from, as a host that restarted does; meanwhile b went and c came.
	w.cutOff(status.Error(codes.ResourceExhausted, "the watch of ConfigMap fell more than 1000 events behind and was cut off"),
		[]string{"b"}, ownedConfigMap("c", "x"))
	eventuallyListed(t, c, "x", "a", "c")
	w.mu.Lock()
	watches := w.watches
	w.mu.Unlock()
	if watches < 3 {
		t.Errorf("%d Watches, want at least 3: the first, the resume the host refused, the relist", watches)
	}
	w.set(ownedConfigMap("d", "x"))
	eventuallyListed(t, c, "x", "a", "c", "d")

	// An unstructured list gets the same objects, through their JSON.
	var list unstructured.UnstructuredList
	list.SetAPIVersion("v1")
	list.SetKind("ConfigMapList")
	if err := c.List(context.Background(), &list, ctrlclient.InNamespace("ns"), ctrlclient.MatchingFields{"owner": "x"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range list.Items {
		if u.GetKind() != "ConfigMap" || len(u.GetOwnerReferences()) != 1 {
			t.Errorf("listed %s %s with owners %v, want a ConfigMap with its owner", u.GetKind(), u.GetName(), u.GetOwnerReferences())
		}
		names = append(names, u.GetName())
	}
	if slices.Sort(names); !slices.Equal(names, []string{"a", "c", "d"}) {
		t.Errorf("an unstructured List by the index selected %q, want [a c d]", names)
	}
}
