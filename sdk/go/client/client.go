package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"

	"github.com/polyop/polyop/sdk/go/address"
)

// AddressEnv is the environment variable that holds the address of the host's
// Cluster service when Options.Address is empty. The host sets it in the
// sidecar container of the manifests it generates.
const AddressEnv = "POLYOP_CLUSTER_ADDRESS"

// DefaultMaxMessageSize is the largest gRPC message a Client sends or receives
// unless Options.MaxMessageSize says otherwise: 64 MiB, as on the host.
const DefaultMaxMessageSize = 64 << 20

// Options configure a Client.
type Options struct {
	// Address is where the host serves its Cluster service, in the forms the
	// host's flags take: unix:///abs/path.sock, unix:relative/path.sock,
	// tcp://host:port or host:port. Ignored when Conn is set.
	// Defaults to the POLYOP_CLUSTER_ADDRESS environment variable.
	Address string

	// Conn is a connection to the Cluster service to use instead of dialing
	// Address. The Client does not close it. Defaults to a connection the
	// Client dials, lazily, on its first call.
	Conn grpc.ClientConnInterface

	// Scheme maps Go types to kinds and back. Defaults to client-go's
	// kubernetes scheme (scheme.Scheme), as in controller-runtime.
	Scheme *runtime.Scheme

	// FieldOwner is the field manager of the Client's writes when a call
	// names none with client.FieldOwner. Defaults to the host's,
	// "polyop-<sidecar name>".
	FieldOwner string

	// MaxMessageSize is the largest gRPC message, in bytes, the Client sends or
	// receives. Keep it in step with the host's --max-message-size.
	// Defaults to DefaultMaxMessageSize (64 MiB).
	MaxMessageSize int

	// TLS dials Address with TLS: the host's certificate verified against
	// TLS.RootCAs, and TLS.Certificates presented as the client certificate
	// the host's mutual TLS requires (see TLSConfig). Ignored when Conn is set.
	// Defaults to TLSConfigFromEnv(): TLS when POLYOP_CLUSTER_TLS_CA_FILE is
	// set, else plain text, which is what a unix socket or a loopback address
	// takes.
	TLS *tls.Config

	// DialOptions are added to the Client's own when it dials Address (after
	// its transport credentials, so grpc.WithTransportCredentials here
	// replaces them). Defaults to none.
	DialOptions []grpc.DialOption

	// Logger logs what the Client cannot return as an error, such as an event
	// that could not be recorded. Defaults to controller-runtime's log.Log
	// named "cluster-client".
	Logger logr.Logger
}

// Client is a controller-runtime client.Client backed by the host's Cluster
// service. Create one with New. A Client is safe for concurrent use.
type Client struct {
	cluster    polyopv1alpha1.ClusterServiceClient
	conn       *grpc.ClientConn // nil when Options.Conn was given
	scheme     *runtime.Scheme
	mapper     *restMapper
	fieldOwner string
	callOpts   []grpc.CallOption
	log        logr.Logger
	indexes    localIndexes
	// background is the context of the Watches behind the local indexes,
	// ended by Close.
	background context.Context
	stop       context.CancelFunc
}

var _ ctrlclient.Client = (*Client)(nil)

// New returns a Client for the Cluster service at Options.Address (or
// POLYOP_CLUSTER_ADDRESS). It does not connect: the connection is made on the
// first call, and re-made after a failure, so New succeeds before the host
// serves.
func New(opts Options) (*Client, error) {
	if opts.MaxMessageSize < 0 {
		return nil, fmt.Errorf("polyop client: Options.MaxMessageSize must not be negative, got %d", opts.MaxMessageSize)
	}
	if opts.Scheme == nil {
		opts.Scheme = clientgoscheme.Scheme
	}
	if opts.MaxMessageSize == 0 {
		opts.MaxMessageSize = DefaultMaxMessageSize
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logf.Log.WithName("cluster-client")
	}
	c := &Client{
		scheme:     opts.Scheme,
		fieldOwner: opts.FieldOwner,
		callOpts: []grpc.CallOption{
			grpc.MaxCallRecvMsgSize(opts.MaxMessageSize),
			grpc.MaxCallSendMsgSize(opts.MaxMessageSize),
		},
		log: opts.Logger,
	}
	c.background, c.stop = context.WithCancel(context.Background())
	conn := opts.Conn
	if conn == nil {
		address := opts.Address
		if address == "" {
			address = os.Getenv(AddressEnv)
		}
		if address == "" {
			return nil, fmt.Errorf("polyop client: no Cluster service address: set Options.Address or the %s environment variable", AddressEnv)
		}
		target, err := Target(address)
		if err != nil {
			return nil, err
		}
		tlsConfig := opts.TLS
		if tlsConfig == nil {
			if tlsConfig, err = TLSConfigFromEnv(); err != nil {
				return nil, err
			}
		}
		cc, err := grpc.NewClient(target, append([]grpc.DialOption{transportCredentials(tlsConfig)}, opts.DialOptions...)...)
		if err != nil {
			return nil, fmt.Errorf("polyop client: connecting to %s: %w", address, err)
		}
		c.conn = cc
		conn = cc
	}
	c.cluster = polyopv1alpha1.NewClusterServiceClient(conn)
	c.mapper = newRESTMapper(c)
	return c, nil
}

// Close stops the Watches of the Client's local indexes and closes the
// connection the Client dialed; a connection given in Options.Conn is left
// open.
func (c *Client) Close() error {
	c.stop()
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// Scheme returns the scheme the Client maps types to kinds with.
func (c *Client) Scheme() *runtime.Scheme { return c.scheme }

// RESTMapper returns a RESTMapper backed by the host's discovery; see
// the package documentation.
func (c *Client) RESTMapper() meta.RESTMapper { return c.mapper }

// GroupVersionKindFor returns the kind of obj: from the scheme for typed
// objects, from the object itself for unstructured objects and
// PartialObjectMetadata.
func (c *Client) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, c.scheme)
}

// IsObjectNamespaced reports whether objects of obj's kind live in
// namespaces, as the host's discovery says.
func (c *Client) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return false, err
	}
	return apiutil.IsGVKNamespaced(gvk, c.mapper)
}

// Target turns a Cluster service address (unix:///abs/path.sock,
// unix:relative/path.sock, tcp://host:port or host:port) into a gRPC dial
// target; TCP addresses are resolved through DNS.
func Target(addr string) (string, error) {
	t, err := address.Target(addr, "dns")
	if err != nil {
		return "", fmt.Errorf("polyop client: %w", err)
	}
	return t, nil
}

// call runs one Cluster service call and turns its error into the error the
// caller sees: the API server's own, or a wrapped one saying what failed.
// gvk is the kind the call is about.
func (c *Client) call(ctx context.Context, gvk schema.GroupVersionKind, what func() string, fn func(ctx context.Context, opts ...grpc.CallOption) error) error {
	err := fn(ctx, c.callOpts...)
	if err == nil {
		return nil
	}
	return wrapError(ctx, gvk, what(), err)
}
