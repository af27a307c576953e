package sidecar

import (
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultMaxMessageSize is the largest gRPC message a Server sends or receives
// unless Options.MaxMessageSize says otherwise: 64 MiB, as on the host.
const DefaultMaxMessageSize = 64 << 20

// DefaultGracefulShutdownTimeout is how long a Server waits for calls in
// flight when it stops, unless Options.GracefulShutdownTimeout says otherwise.
const DefaultGracefulShutdownTimeout = 30 * time.Second

// Options configure a Server.
type Options struct {
	// Name is a short name for the sidecar (for example "memcached-operator"),
	// used in the host's logs and metrics and, unless a host flag overrides it,
	// its leader election lease. Lower-case letters, digits and '-'. Required.
	Name string

	// Scheme maps Go types to the kinds they reconcile and decodes objects.
	// Defaults to client-go's kubernetes scheme (scheme.Scheme), as in
	// controller-runtime; add your own types to it, or pass a scheme of your own.
	Scheme *runtime.Scheme

	// MaxMessageSize is the largest gRPC message, in bytes, the Server sends or
	// receives. Keep it in step with the host's --max-message-size.
	// Defaults to DefaultMaxMessageSize (64 MiB).
	MaxMessageSize int

	// GracefulShutdownTimeout is how long Serve waits, once its context is
	// done, for the calls in flight to finish before it closes their
	// connections. Defaults to DefaultGracefulShutdownTimeout (30 seconds).
	GracefulShutdownTimeout time.Duration

	// ServerOptions are added to the gRPC server's options after the Server's
	// own (message sizes and a stats handler), for example grpc.Creds to serve
	// TLS on a TCP address, or interceptors of your own. Defaults to none.
	ServerOptions []grpc.ServerOption

	// TracerProvider traces the Server's calls: each handler runs in a server
	// span whose parent is the host's span (W3C trace context in the call's
	// metadata), trace.SpanFromContext(ctx) returns it, and the Cluster
	// service calls made with ctx are its children. Defaults to nil: the
	// Server sets up a provider from the OTEL_* environment variables when
	// they turn tracing on (see package tracing) and flushes it when Serve
	// returns; when they do not, calls are not traced.
	TracerProvider trace.TracerProvider

	// Reflection serves gRPC server reflection (grpc.reflection.v1), so that
	// grpcurl lists and calls the sidecar without its proto files. Defaults
	// to nil: served on a unix socket, not on a TCP address.
	Reflection *bool

	// ReconcileStream serves SidecarService.ReconcileStream and announces it
	// in DescribeResponse.reconcile_stream, so that the host sends its
	// Reconcile and Finalize calls on streams, one per worker: each call is
	// served exactly as the unary call (the same handler, deadline, errors,
	// logs and spans), for a message each way instead of a new gRPC call.
	// False: the host calls the unary Reconcile and Finalize, and a stream
	// it opens anyway fails with UNIMPLEMENTED. Defaults to nil: true.
	ReconcileStream *bool

	// Logger is the Server's logger; every reconcile gets a child of it, with
	// the controller, kind, namespace and name, through log.FromContext.
	// Defaults to controller-runtime's log.Log named "sidecar".
	Logger logr.Logger
}

// reconcileStream tells whether the Server serves ReconcileStream.
func (o *Options) reconcileStream() bool {
	return o.ReconcileStream == nil || *o.ReconcileStream
}

func (o Options) withDefaults() Options {
	if o.Scheme == nil {
		o.Scheme = clientgoscheme.Scheme
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.GracefulShutdownTimeout == 0 {
		o.GracefulShutdownTimeout = DefaultGracefulShutdownTimeout
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logf.Log.WithName("sidecar")
	}
	return o
}

// BindFlags binds the options a sidecar binary usually exposes to fs:
//
//	--max-message-size  the largest gRPC message, as bytes or a quantity such
//	                    as 64Mi (sets MaxMessageSize)
//
// Call it before fs is parsed, as with controller-runtime's zap.Options.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	fs.Var((*sizeFlag)(&o.MaxMessageSize), "max-message-size",
		"The largest gRPC message the sidecar sends or receives, in bytes or as a quantity such as 64Mi. "+
			"Keep it in step with the host's --max-message-size.")
}

// sizeFlag is a byte count given as a plain number or a Kubernetes quantity.
type sizeFlag int

func (s *sizeFlag) String() string {
	if s == nil {
		return ""
	}
	return resource.NewQuantity(int64(*s), resource.BinarySI).String()
}

func (s *sizeFlag) Set(value string) error {
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return fmt.Errorf("not a size in bytes or a quantity such as 64Mi: %w", err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 || n > math.MaxInt32 {
		return fmt.Errorf("%s must be at least 1 byte and less than 2Gi", value)
	}
	*s = sizeFlag(n)
	return nil
}
