package sidecar

import (
	"context"
	"fmt"
	"os"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	polyopclient "github.com/polyop/polyop/sdk/go/client"
)

// clusterAccess is a Server's way to the host's Cluster service: one client,
// made on first use, over a connection dialed on first call.
type clusterAccess struct {
	conn   lazyConn
	once   sync.Once
	client *polyopclient.Client
}

// GetClient returns a controller-runtime client.Client backed by the host's
// Cluster service (see package sdk/go/client), as a manager's GetClient does
// in controller-runtime: reads come from the host's cache for the kinds it
// watches, writes go through the host's client. The Server's scheme maps types
// to kinds.
//
// It can be called before the Server serves, typically when a reconciler is
// set up: the client connects on its first call, to the address the host
// announced in its DescribeRequest, or, before the host has described the
// sidecar or when it announced none, to the POLYOP_CLUSTER_ADDRESS
// environment variable. A call with neither fails with gRPC status
// FAILED_PRECONDITION. It dials with TLS when POLYOP_CLUSTER_TLS_CA_FILE is
// set (see polyopclient.TLSConfigFromEnv), as a host serving its Cluster
// service on the network requires.
func (s *Server) GetClient() client.Client {
	return s.clusterClient()
}

// Watch watches the objects of list's item kind through the host's Cluster
// service and delivers them, typed, on the channel it returns, until ctx ends:
// the objects the host caches (each client.Added), then client.Synced, then
// every change; it resumes, or lists again, by itself when the stream ends.
// See polyopclient.Client.Watch. It can be called before the Server serves:
// it waits for the host's Cluster service address.
func (s *Server) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (<-chan polyopclient.Event, error) {
	return s.clusterClient().Watch(ctx, list, opts...)
}

// GetFieldIndexer returns a client.FieldIndexer, as a manager's does in
// controller-runtime: IndexField(ctx, &batchv1.Job{}, field, fn) registers a
// Go index func, and a List of GetClient with client.MatchingFields{field:
// value} is then answered from the sidecar's own copy of every object of the
// kind, kept through the host's Watch stream and indexed by fn. The copy
// starts on the first such List, which waits (bounded by its ctx) until it is
// complete. It costs the sidecar the memory of every object of the kind the
// host caches. Only kinds the host caches can be indexed so (see CacheKind).
// A copy whose Watch fails recovers by itself, and meanwhile Lists by its
// indexes fail at once saying why; see polyopclient.Client.IndexField.
func (s *Server) GetFieldIndexer() client.FieldIndexer {
	return s.clusterClient()
}

// GetEventRecorder returns a recorder of Kubernetes events on any object,
// recorded by the host through the Cluster service, as a manager's
// GetEventRecorder does in controller-runtime. name is accepted for
// symmetry with it: the host records every event under its own reporting
// controller. For events on the object being reconciled, Recorder(ctx) needs
// no Cluster service and keeps the events in order with the reconcile.
func (s *Server) GetEventRecorder(name string) events.EventRecorder {
	_ = name
	return polyopclient.NewEventRecorder(s.clusterClient())
}

func (s *Server) clusterClient() *polyopclient.Client {
	s.cluster.once.Do(func() {
		c, err := polyopclient.New(polyopclient.Options{
			Conn:           &s.cluster.conn,
			Scheme:         s.opts.Scheme,
			MaxMessageSize: s.opts.MaxMessageSize,
			Logger:         s.log.WithName("cluster-client"),
		})
		if err != nil {
			// New fails only on options the Server has validated already.
			panic(fmt.Sprintf("sidecar: building the cluster client: %v", err))
		}
		s.cluster.client = c
	})
	return s.cluster.client
}

// setClusterAddress records the Cluster service address the host announced.
func (s *Server) setClusterAddress(address string) {
	s.cluster.conn.setHostAddress(address)
}

// lazyConn is a grpc.ClientConnInterface that dials the Cluster service on
// its first call, and again when the address changes.
type lazyConn struct {
	mu          sync.Mutex
	hostAddress string // announced by the host; empty until then
	address     string // of conn
	conn        *grpc.ClientConn
	dialOptions []grpc.DialOption // added to conn's, for tracing
}

var _ grpc.ClientConnInterface = (*lazyConn)(nil)

// setDialOptions adds opts to those of the connections dialed from now on.
func (l *lazyConn) setDialOptions(opts ...grpc.DialOption) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dialOptions = append(l.dialOptions, opts...)
}

func (l *lazyConn) setHostAddress(address string) {
	if address == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hostAddress = address
}

// get returns the connection to the current address.
func (l *lazyConn) get() (*grpc.ClientConn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	address := l.hostAddress
	if address == "" {
		address = os.Getenv(polyopclient.AddressEnv)
	}
	if address == "" {
		return nil, status.Errorf(codes.FailedPrecondition,
			"no Cluster service address: the host announced none in its DescribeRequest (does it serve one?) and %s is not set", polyopclient.AddressEnv)
	}
	if l.conn != nil && l.address == address {
		return l.conn, nil
	}
	target, err := polyopclient.Target(address)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	creds, err := polyopclient.DialOption()
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	conn, err := grpc.NewClient(target, append([]grpc.DialOption{creds}, l.dialOptions...)...)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "connecting to the Cluster service at %s: %v", address, err)
	}
	if l.conn != nil {
		// The host announced another address than the environment's; calls in
		// flight on the old connection fail and are retried by their callers.
		_ = l.conn.Close()
	}
	l.conn, l.address = conn, address
	return conn, nil
}

func (l *lazyConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	conn, err := l.get()
	if err != nil {
		return err
	}
	return conn.Invoke(ctx, method, args, reply, opts...)
}

func (l *lazyConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	conn, err := l.get()
	if err != nil {
		return nil, err
	}
	return conn.NewStream(ctx, desc, method, opts...)
}
