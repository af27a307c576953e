package sidecar_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	polyopclient "github.com/polyop/polyop/sdk/go/client"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// tinyCluster is a Cluster service that knows one ConfigMap and keeps the
// events it is asked to record.
type tinyCluster struct {
	polyopv1alpha1.UnimplementedClusterServiceServer
	name string // of the ConfigMap, which says which service answered

	mu     sync.Mutex
	events []*polyopv1alpha1.RecordEventRequest
}

func (c *tinyCluster) Get(_ context.Context, req *polyopv1alpha1.GetRequest) (*polyopv1alpha1.GetResponse, error) {
	if req.GetKind().GetKind() != "ConfigMap" || req.GetKey().GetName() != c.name {
		return nil, status.Error(codes.NotFound, "not found")
	}
	data, _ := json.Marshal(&corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: req.GetKey().GetNamespace(), Name: c.name},
	})
	return &polyopv1alpha1.GetResponse{Object: data, Source: polyopv1alpha1.ReadSource_READ_SOURCE_CACHE}, nil
}

func (c *tinyCluster) RecordEvent(_ context.Context, req *polyopv1alpha1.RecordEventRequest) (*polyopv1alpha1.RecordEventResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, req)
	return &polyopv1alpha1.RecordEventResponse{}, nil
}

func (c *tinyCluster) recorded() []*polyopv1alpha1.RecordEventRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*polyopv1alpha1.RecordEventRequest(nil), c.events...)
}

// serveTinyCluster serves a tinyCluster on a unix socket and returns its
// address.
func serveTinyCluster(t *testing.T, c *tinyCluster) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sc-")
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
	polyopv1alpha1.RegisterClusterServiceServer(gs, c)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return "unix://" + socket
}

func getConfigMap(ctx context.Context, c client.Client, name string) error {
	return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &corev1.ConfigMap{})
}

// The environment is process-wide, so these tests do not run in parallel.
func TestGetClientDialsTheAddressTheHostAnnounces(t *testing.T) {
	fromEnv := serveTinyCluster(t, &tinyCluster{name: "from-env"})
	fromHost := serveTinyCluster(t, &tinyCluster{name: "from-host"})
	srv := newServer(t)
	c := srv.GetClient() // before any address is known, as a reconciler's setup does
	ctx := t.Context()

	t.Setenv(polyopclient.AddressEnv, "")
	err := getConfigMap(ctx, c, "from-env")
	if status.Code(errorsUnwrapAll(err)) != codes.FailedPrecondition || !strings.Contains(err.Error(), polyopclient.AddressEnv) {
		t.Errorf("without an address: %v", err)
	}

	t.Setenv(polyopclient.AddressEnv, fromEnv)
	if err := getConfigMap(ctx, c, "from-env"); err != nil {
		t.Errorf("before the host describes the sidecar, the environment's address is used: %v", err)
	}

	if _, err := sidecar.Service(srv).Describe(ctx, &polyopv1alpha1.DescribeRequest{ProtocolVersion: sidecar.ProtocolVersion, ClusterAddress: fromHost}); err != nil {
		t.Fatal(err)
	}
	if err := getConfigMap(ctx, c, "from-host"); err != nil {
		t.Errorf("after Describe, the host's address is used: %v", err)
	}
	if srv.GetClient() != c {
		t.Error("GetClient returned another client")
	}
	if srv.GetClient().Scheme() != srv.Scheme() {
		t.Error("the client does not use the Server's scheme")
	}
}

func TestGetEventRecorderRecordsThroughTheClusterService(t *testing.T) {
	cluster := &tinyCluster{}
	address := serveTinyCluster(t, cluster)
	srv := newServer(t)
	if _, err := sidecar.Service(srv).Describe(t.Context(), &polyopv1alpha1.DescribeRequest{ProtocolVersion: sidecar.ProtocolVersion, ClusterAddress: address}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
	srv.GetEventRecorder("settings-controller").Eventf(cm, nil, corev1.EventTypeWarning, "Invalid", "Validating", "key %q is missing", "color")
	if len(cluster.recorded()) != 1 {
		t.Fatalf("%d events were recorded once Eventf returned, want 1", len(cluster.recorded()))
	}
	got := cluster.recorded()[0]
	if got.GetKind().GetKind() != "ConfigMap" || got.GetKey().GetName() != "settings" ||
		got.GetEvent().GetMessage() != `key "color" is missing` || got.GetEvent().GetType() != polyopv1alpha1.EventType_EVENT_TYPE_WARNING {
		t.Errorf("recorded %v", got)
	}
}

// errorsUnwrapAll returns the innermost error of a chain of single wraps.
func errorsUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}
