package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/tracing"

	addresspkg "github.com/polyop/polyop/internal/address"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fencing"
)

// DefaultAddress is where the host serves the ClusterService unless told
// otherwise: a unix socket beside the sidecar's, in the volume both containers
// of the pod mount at /var/run/polyop.
const DefaultAddress = "unix:///var/run/polyop/cluster.sock"

// Clients are what the server reads and writes through.
type Clients struct {
	// Cache reads the kinds the host caches. It must not be asked for any
	// other kind: the server guarantees it, since an informer cache would
	// start an informer for it.
	Cache client.Reader
	// APIReader reads from the API server directly.
	APIReader client.Reader
	// Dynamic writes.
	Dynamic dynamic.Interface
	// Mapper maps kinds to resources and scopes.
	Mapper meta.RESTMapper
	// Recorder records events.
	Recorder recorder.EventRecorder
	// Informers serves Watch from the informers of the cached kinds (the
	// manager's cache). Defaults to none: Watch is refused.
	Informers cache.Informers
}

// Options configure a Server.
type Options struct {
	// CachedKinds are the kinds the host's cache holds, each with the
	// namespaces it holds them in (none: every namespace, or a cluster-scoped
	// kind). Reads of other kinds, or in other namespaces, go to the API
	// server. Defaults to none: every read goes to the API server.
	CachedKinds map[schema.GroupVersionKind][]string
	// DeclaredKinds are the cached kinds the sidecar declared for cached
	// reads or indexes. A read of one outside the namespaces cached is
	// refused with FAILED_PRECONDITION, naming them, unless it sets
	// uncached: the sidecar asked for the cache, and the API server may not
	// even allow the read. Defaults to none: such reads go to the API
	// server.
	DeclaredKinds map[schema.GroupVersionKind]bool
	// ShardedKinds are the cached kinds the cache holds only this replica's
	// share of (sharding): Get and List of them read from the API server,
	// with READ_SOURCE_API_SERVER, so that an object another replica owns is
	// not "not found"; Watch streams the replica's share from the cache.
	// Defaults to none.
	ShardedKinds map[schema.GroupVersionKind]bool
	// Indexes are the names of the cache indexes of each kind, which a List
	// from the cache may select by with a field selector "<name>=<value>",
	// for the errors of a List that selects by another field. Defaults to
	// none.
	Indexes map[schema.GroupVersionKind][]string
	// WriteNamespaces are the namespaces the sidecar may write namespaced
	// objects in (create, update, patch, delete, subresources, events): the
	// namespaces the host watches. A write elsewhere is refused with
	// PERMISSION_DENIED and an APIError of reason Forbidden. Cluster-scoped
	// objects are left to the host's RBAC. Defaults to none: every
	// namespace, for a host that watches every namespace.
	WriteNamespaces []string
	// Grants are what the sidecar's description grants
	// (description.Resolved.Grants), the host's RBAC renders, and the server
	// serves: a write (create, update, patch, delete, on the object or a
	// subresource) of a kind no grant names, and a read of Secrets where no
	// grant allows it, are refused with PERMISSION_DENIED and an APIError of
	// reason Forbidden that says how to declare it. The host always sets
	// them. Defaults to nil: no such limit, for a server in front of no real
	// API server (polyop render's recording one).
	Grants *description.Grants
	// Fence, when set, is the lease the replica writes under: a write is
	// served only while the replica holds it, with its term's end as the
	// write's deadline (see fencing). Defaults to nil: writes are served
	// whatever the replica holds.
	Fence fencing.Fence
	// FieldManager is the field manager of writes that name none. Defaults to
	// "polyop".
	FieldManager string
	// TLS serves the service over TLS, which should require client
	// certificates (see MutualTLS). Listen refuses a TCP address other than
	// loopback without it. Defaults to none: plain text, for a unix socket or
	// a loopback address.
	TLS *tls.Config
	// MaxMessageSize bounds gRPC messages in both directions, in bytes.
	// Defaults to gRPC's own limits.
	MaxMessageSize int
	// TracerProvider traces every call: a call carrying the W3C trace
	// context of a sidecar's handler becomes a server span in that trace.
	// Defaults to nil: calls are not traced.
	TracerProvider trace.TracerProvider
	// WatchBuffer is how many events a Watch stream may fall behind before
	// it is cut off with RESOURCE_EXHAUSTED: the memory a stream may hold.
	// Defaults to 1000.
	WatchBuffer int
	// WatchHistory is how many of a watched kind's latest changes the host
	// remembers, so that a stream can resume after one of them. Defaults to
	// 1000.
	WatchHistory int
	// WatchBookmarkInterval is how often a Watch stream with nothing to send
	// gets a BOOKMARK. Defaults to a minute.
	WatchBookmarkInterval time.Duration
	// Log receives a line per request at V(1). Defaults to a logger that
	// discards.
	Log logr.Logger
	// Progress, when set, is the CacheProgress whose Versions make this
	// server's Watch streams catch up with what the host's controllers saw.
	// Defaults to nil: nothing asks them to.
	Progress *CacheProgress
}

// Server implements polyopv1alpha1.ClusterServiceServer. It is also a
// manager.Runnable that serves on the listener Listen opened, on every
// replica, leader or not: the sidecar of each replica talks to its own host.
type Server struct {
	polyopv1alpha1.UnimplementedClusterServiceServer

	clients Clients
	opts    Options
	lis     net.Listener
	address string

	// stopping is closed when the server stops, ending every Watch.
	stopping chan struct{}
	hubsMu   sync.Mutex
	hubs     map[schema.GroupVersionKind]*hub
	// hubList is every hub of hubs, replaced (under hubsMu) when one is
	// added, for CacheProgress.Versions to read without waiting for a
	// hub that is being built.
	hubList atomic.Pointer[[]*hub]
}

var (
	_ polyopv1alpha1.ClusterServiceServer = &Server{}
	_ manager.LeaderElectionRunnable      = &Server{}
)

// New returns a Server reading and writing through clients.
func New(clients Clients, opts Options) *Server {
	if opts.FieldManager == "" {
		opts.FieldManager = "polyop"
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.WatchBuffer <= 0 {
		opts.WatchBuffer = 1000
	}
	if opts.WatchHistory <= 0 {
		opts.WatchHistory = 1000
	}
	if opts.WatchBookmarkInterval <= 0 {
		opts.WatchBookmarkInterval = time.Minute
	}
	s := &Server{clients: clients, opts: opts, stopping: make(chan struct{}), hubs: map[schema.GroupVersionKind]*hub{}}
	if opts.Progress != nil {
		opts.Progress.server.Store(s)
	}
	return s
}

// Listen binds address ("unix:///absolute/path.sock", "unix:relative.sock",
// "tcp://host:port" or "host:port") now, so that a bad address stops the host
// at start rather than once the manager runs. A unix socket's directory is
// created if missing, a stale socket file left by an earlier run is replaced,
// and the socket is made readable and writable by its owner and group only:
// the sidecar container needs the same user, or a group the pod's fsGroup
// gives both containers. A TCP address other than loopback needs
// Options.TLS: without it, Listen fails with ErrPlaintext.
func (s *Server) Listen(address string) error {
	network, path, err := parseAddress(address)
	if err != nil {
		return err
	}
	if network == "tcp" && s.opts.TLS == nil && !addresspkg.IsLoopback(path) {
		return fmt.Errorf("cluster service address %s: %w", address, ErrPlaintext)
	}
	if network == "unix" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("cluster service address %s: %w", address, err)
		}
		if err := removeStaleSocket(path); err != nil {
			return fmt.Errorf("cluster service address %s: %w", address, err)
		}
	}
	lis, err := net.Listen(network, path)
	if err != nil {
		return fmt.Errorf("serving the cluster service at %s: %w", address, err)
	}
	if network == "unix" {
		if err := os.Chmod(path, 0o660); err != nil {
			_ = lis.Close()
			return fmt.Errorf("cluster service address %s: %w", address, err)
		}
	}
	s.lis, s.address = lis, address
	return nil
}

// Address is the address Listen bound.
func (s *Server) Address() string { return s.address }

// NeedLeaderElection implements manager.LeaderElectionRunnable: the service
// runs on every replica.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx is done, then stops gracefully, giving calls in
// flight a few seconds to finish.
func (s *Server) Start(ctx context.Context) error {
	if s.lis == nil {
		return errors.New("the cluster service was started without Listen")
	}
	var opts []grpc.ServerOption
	if s.opts.MaxMessageSize > 0 {
		opts = append(opts, grpc.MaxRecvMsgSize(s.opts.MaxMessageSize), grpc.MaxSendMsgSize(s.opts.MaxMessageSize))
	}
	if s.opts.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.opts.TLS)))
	}
	if s.opts.TracerProvider != nil {
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(s.opts.TracerProvider),
			otelgrpc.WithPropagators(tracing.Propagator()),
		)))
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(s.logCall, s.fenceWrites))
	srv := grpc.NewServer(opts...)
	polyopv1alpha1.RegisterClusterServiceServer(srv, s)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(s.lis) }()
	s.opts.Log.Info("serving the cluster service", "address", s.address, "tls", s.opts.TLS != nil)
	select {
	case err := <-served:
		return fmt.Errorf("cluster service at %s: %w", s.address, err)
	case <-ctx.Done():
	}
	close(s.stopping)
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		srv.Stop()
	}
	return nil
}

// ResolveKind implements polyopv1alpha1.ClusterServiceServer.
func (s *Server) ResolveKind(_ context.Context, req *polyopv1alpha1.ResolveKindRequest) (*polyopv1alpha1.ResolveKindResponse, error) {
	k := req.GetKind()
	if k.GetKind() == "" {
		return nil, invalid("kind.kind is required")
	}
	var versions []string
	if k.GetVersion() != "" {
		versions = []string{k.GetVersion()}
	}
	m, err := s.clients.Mapper.RESTMapping(schema.GroupKind{Group: k.GetGroup(), Kind: k.GetKind()}, versions...)
	if err != nil {
		return nil, toStatus(err)
	}
	return &polyopv1alpha1.ResolveKindResponse{
		Kind:       gvkProto(m.GroupVersionKind),
		Resource:   m.Resource.Resource,
		Namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace,
	}, nil
}

// mapping resolves gvk, which must name a version and a kind.
func (s *Server) mapping(k *polyopv1alpha1.GroupVersionKind) (*meta.RESTMapping, error) {
	if k.GetVersion() == "" || k.GetKind() == "" {
		return nil, invalid("kind needs a version and a kind, got %q", k.String())
	}
	gvk := schema.GroupVersionKind{Group: k.GetGroup(), Version: k.GetVersion(), Kind: k.GetKind()}
	m, err := s.clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, toStatus(err)
	}
	return m, nil
}

// refuseUncached refuses a read of a kind the sidecar declared for cached
// reads in namespace ("" for every namespace), which the cache does not hold.
func (s *Server) refuseUncached(gvk schema.GroupVersionKind, namespace string) error {
	where := "across every namespace"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	return status.Errorf(codes.FailedPrecondition,
		"the host caches %s in namespaces %s only (the namespaces the sidecar declares for it, narrowed by the host's --namespace), not %s: "+
			"read in one of those namespaces, or set uncached to read from the API server, which the host's RBAC must allow",
		gvk.Kind, strings.Join(s.opts.CachedKinds[gvk], ", "), where)
}

// cached reports whether the host's cache holds every object of gvk in
// namespace ("" for every namespace, or a cluster-scoped kind). A List across
// every namespace of a kind the host caches in some namespaces only is not
// cached: the cache would silently leave the others out.
func (s *Server) cached(gvk schema.GroupVersionKind, namespace string) bool {
	namespaces, ok := s.opts.CachedKinds[gvk]
	if !ok {
		return false
	}
	return len(namespaces) == 0 || namespace != "" && slices.Contains(namespaces, namespace)
}

// fieldManager is the write's field manager, or the server's default.
func (s *Server) fieldManager(o *polyopv1alpha1.WriteOptions) string {
	if m := o.GetFieldManager(); m != "" {
		return m
	}
	return s.opts.FieldManager
}

// parseAddress splits an address into a network and an address for
// net.Listen.
func parseAddress(addr string) (network, path string, err error) {
	if network, path, err = addresspkg.Parse(addr); err != nil {
		return "", "", fmt.Errorf("cluster service %w", err)
	}
	return network, path, nil
}

// removeStaleSocket removes a socket file nobody listens on any more. A socket
// something still answers on is left alone, and Listen then fails.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = conn.Close()
		return fmt.Errorf("another process serves on %s", path)
	}
	return os.Remove(path)
}

func gvkProto(gvk schema.GroupVersionKind) *polyopv1alpha1.GroupVersionKind {
	return &polyopv1alpha1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
}
