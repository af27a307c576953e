package client_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyop/polyop/sdk/go/client"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// brokenListServer's first Watch breaks off in the middle of its initial
// list; every later one lists two ConfigMaps whole.
type brokenListServer struct {
	polyopv1alpha1.UnimplementedClusterServiceServer

	mu       sync.Mutex
	versions []string
}

func (s *brokenListServer) Watch(req *polyopv1alpha1.WatchRequest, stream polyopv1alpha1.ClusterService_WatchServer) error {
	s.mu.Lock()
	s.versions = append(s.versions, req.GetResourceVersion())
	first := len(s.versions) == 1
	s.mu.Unlock()
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", ResourceVersion: "7"}}
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", ResourceVersion: "3"}}
	if err := stream.Send(watchEvent(polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_ADDED, a)); err != nil {
		return err
	}
	if first {
		return status.Error(codes.Unavailable, "the host is shutting down")
	}
	if err := stream.Send(watchEvent(polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_ADDED, b)); err != nil {
		return err
	}
	if err := stream.Send(&polyopv1alpha1.WatchResponse{Type: polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_INITIAL_LIST_DONE, ResourceVersion: "9"}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// An object's own version in an initial list says nothing about the objects
// the list has yet to send (b, older than a, comes after it): a watch broken
// off before INITIAL_LIST_DONE must list again, not resume from the last
// object it received, or it never sees b.
func TestAWatchBrokenOffInItsInitialListListsAgain(t *testing.T) {
	s := &brokenListServer{}
	c := serveCluster(t, s)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	events, err := c.Watch(ctx, &corev1.ConfigMapList{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range events {
		if ev.Type == client.Synced {
			break
		}
		if ev.Object == nil {
			t.Fatalf("watch event %s: %v", ev.Type, ev.Err)
		}
		got = append(got, string(ev.Type)+" "+ev.Object.GetName())
	}
	if want := []string{"Added a", "Modified a", "Added b"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if want := []string{"", ""}; !slices.Equal(s.versions, want) {
		t.Errorf("the watch asked for versions %q, want %q: a list, then a list again", s.versions, want)
	}
}
