package sidecar

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/polyop/polyop/internal/description"
	sdkaddress "github.com/polyop/polyop/sdk/go/address"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// DefaultMaxMessageSize is the largest gRPC message either side accepts unless
// configured otherwise: 64 MiB, well above gRPC's own 4 MiB default, so that a
// reconcile carrying a few hundred children still fits.
const DefaultMaxMessageSize = 64 << 20

// Options configure a Client.
type Options struct {
	// Address is the sidecar's endpoint; see Target for the accepted forms.
	// Defaults to the SDK's address.Default, a unix socket in the volume
	// both containers of the pod mount at /var/run/polyop.
	Address string

	// MaxMessageSize bounds every message sent or received, in bytes.
	// Defaults to DefaultMaxMessageSize.
	MaxMessageSize int

	// MaxObjectSize bounds the status and each desired child of a
	// ReconcileResponse, in bytes: a longer one is not read, and Reconcile
	// returns a TooLargeError for it. Defaults to DefaultMaxObjectSize.
	MaxObjectSize int

	// DescribeTimeout is the deadline of the Describe call. Defaults to 10s.
	DescribeTimeout time.Duration

	// ReconcileTimeout is the deadline of each Reconcile and Finalize call.
	// Defaults to 30s.
	ReconcileTimeout time.Duration

	// CheckTimeout is the deadline of each health check made for readiness.
	// Defaults to 1s.
	CheckTimeout time.Duration

	// ClusterAddress is where the host serves its ClusterService for the
	// sidecar, sent in DescribeRequest.cluster_address. Defaults to "": the
	// host serves none.
	ClusterAddress string

	// MaxReconnectDelay caps gRPC's backoff between two attempts to connect
	// to the sidecar (give or take its 20% jitter), so that the connection,
	// and with it readiness and every call, is back at most about this long
	// after the sidecar is. Defaults to gRPC's own cap, 120s.
	MaxReconnectDelay time.Duration

	// TracerProvider traces the calls to the sidecar: each carries the W3C
	// trace context of the caller's span (and its baggage) in its metadata,
	// in a client span of its own. Health checks are not traced. Defaults to
	// nil: calls are not traced and carry no trace context.
	TracerProvider trace.TracerProvider

	// DisableStreams makes every Reconcile and Finalize call a unary call,
	// even to a sidecar that serves ReconcileStream. Defaults to false: with
	// a sidecar whose DescribeResponse sets reconcile_stream, the calls go on
	// streams, one per concurrent caller (see ReconcileStream in the
	// protocol).
	DisableStreams bool

	// DialOptions are appended to the client's own, for tests and TLS.
	DialOptions []grpc.DialOption
}

func (o *Options) defaults() {
	if o.Address == "" {
		o.Address = sdkaddress.Default
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.MaxObjectSize <= 0 {
		o.MaxObjectSize = DefaultMaxObjectSize
	}
	if o.DescribeTimeout <= 0 {
		o.DescribeTimeout = 10 * time.Second
	}
	if o.ReconcileTimeout <= 0 {
		o.ReconcileTimeout = 30 * time.Second
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = time.Second
	}
}

// Client is the host's connection to its sidecar. It is safe for concurrent
// use; one Client serves every controller of the host.
type Client struct {
	opts   Options
	conn   *grpc.ClientConn
	svc    polyopv1alpha1.SidecarServiceClient
	health healthpb.HealthClient
	// streams carry the Reconcile and Finalize calls once Describe found
	// that the sidecar serves ReconcileStream.
	streams *streams
	// tracer traces the calls made on streams; nil without
	// Options.TracerProvider.
	tracer trace.Tracer
	// ready is the readiness check's state (see Check).
	ready readiness
}

// New creates a Client for the sidecar at opts.Address. It does not connect:
// gRPC connects lazily and reconnects on its own after the sidecar restarts.
func New(opts Options) (*Client, error) {
	opts.defaults()
	target, err := Target(opts.Address)
	if err != nil {
		return nil, err
	}
	dialOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(opts.MaxMessageSize),
			grpc.MaxCallSendMsgSize(opts.MaxMessageSize),
		),
		grpc.WithChainUnaryInterceptor(observeCall),
		grpc.WithStatsHandler(messageSizes{}),
		grpc.WithConnectParams(connectParams(opts.MaxReconnectDelay)),
	}, opts.DialOptions...)
	if opts.TracerProvider != nil {
		dialOpts = append(dialOpts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(opts.TracerProvider),
			otelgrpc.WithPropagators(tracing.Propagator()),
			// A ReconcileStream lives as long as the client: each call on it
			// has a span of its own (see startStreamSpan).
			otelgrpc.WithFilter(filters.None(filters.HealthCheck(), filters.MethodName("ReconcileStream"))),
		)))
	}
	conn, err := grpc.NewClient(target, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("sidecar at %s: %w", opts.Address, err)
	}
	c := &Client{
		opts:    opts,
		conn:    conn,
		svc:     polyopv1alpha1.NewSidecarServiceClient(conn),
		health:  healthpb.NewHealthClient(conn),
		streams: newStreams(conn, opts.Address, opts.ReconcileTimeout),
	}
	if opts.TracerProvider != nil {
		c.tracer = opts.TracerProvider.Tracer(tracerName)
	}
	return c, nil
}

// connectParams is gRPC's connection backoff with its maximum delay set to
// maxDelay, when positive.
func connectParams(maxDelay time.Duration) grpc.ConnectParams {
	p := grpc.ConnectParams{
		Backoff: backoff.DefaultConfig,
		// gRPC's default. An attempt to reach a sidecar that is not running
		// fails at once (nobody listens on its socket or port); this only
		// bounds an attempt that hangs.
		MinConnectTimeout: 20 * time.Second,
	}
	if maxDelay > 0 {
		p.Backoff.MaxDelay = maxDelay
		p.Backoff.BaseDelay = min(p.Backoff.BaseDelay, maxDelay)
	}
	return p
}

// Address is the sidecar's address, as configured.
func (c *Client) Address() string { return c.opts.Address }

// tracerName is the instrumentation scope of the spans of calls made on
// streams: otelgrpc's, which makes the spans of unary calls.
const tracerName = otelgrpc.ScopeName

// Close ends the streams and closes the connection.
func (c *Client) Close() error {
	c.streams.close()
	return c.conn.Close()
}

// Streams reports whether Reconcile and Finalize calls go on
// ReconcileStreams: the sidecar announced them, Options.DisableStreams is
// false, and no attempt to open one failed with UNIMPLEMENTED.
func (c *Client) Streams() bool { return c.streams.on.Load() }

func (c *Client) check(ctx context.Context) error {
	resp, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{})
	switch status.Code(err) {
	case codes.OK:
	case codes.Unimplemented:
		return fmt.Errorf("sidecar at %s serves no gRPC health service (grpc.health.v1.Health): it is not a polyop sidecar, or speaks another protocol than %s: %w",
			c.opts.Address, description.ProtocolVersion, err)
	case codes.DeadlineExceeded:
		return fmt.Errorf("sidecar at %s did not answer its health check within %s: %w", c.opts.Address, c.opts.CheckTimeout, err)
	default:
		return fmt.Errorf("sidecar at %s is unreachable: %w", c.opts.Address, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("sidecar at %s reports health status %s, not SERVING", c.opts.Address, resp.GetStatus())
	}
	return nil
}

// readyPoll is how often WaitReady asks the sidecar's health service: a
// health check over a local socket costs next to nothing.
const readyPoll = 100 * time.Millisecond

// WaitReady blocks until the sidecar's health service reports SERVING, the
// timeout passes, or ctx is done. It logs while it waits, so that a host
// started before its sidecar says what it is waiting for.
func (c *Client) WaitReady(ctx context.Context, timeout time.Duration, log logr.Logger) error {
	start := time.Now()
	lastLog := time.Time{}
	var err error
	pollErr := wait.PollUntilContextTimeout(ctx, readyPoll, timeout, true, func(ctx context.Context) (bool, error) {
		attemptCtx, attemptCancel := context.WithTimeout(ctx, c.opts.CheckTimeout)
		err = c.check(attemptCtx)
		attemptCancel()
		if err == nil {
			_ = c.ready.observe(time.Now(), nil)
			return true, nil
		}
		if time.Since(lastLog) > 5*time.Second {
			log.Info("waiting for the sidecar", "address", c.opts.Address, "reason", err.Error())
			lastLog = time.Now()
		}
		return false, nil
	})
	switch {
	case pollErr == nil:
		log.Info("sidecar is ready", "address", c.opts.Address, "waited", time.Since(start).Round(time.Millisecond).String())
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("sidecar at %s did not become ready within %s: %w", c.opts.Address, timeout, err)
}

// Describe asks the sidecar what it implements and validates the answer. A
// protocol version other than ProtocolVersion is an error that names both.
// When the answer sets reconcile_stream, and Options.DisableStreams is
// false, the Reconcile and Finalize calls made after it go on streams.
func (c *Client) Describe(ctx context.Context, hostVersion string) (*description.Description, error) {
	resp, err := c.DescribeRaw(ctx, hostVersion)
	if err != nil {
		return nil, err
	}
	desc, err := description.NewDescription(resp)
	if err != nil {
		return nil, err
	}
	c.streams.on.Store(resp.GetReconcileStream() && !c.opts.DisableStreams)
	return desc, nil
}

// DescribeRaw asks the sidecar what it implements and returns the answer
// unvalidated.
func (c *Client) DescribeRaw(ctx context.Context, hostVersion string) (*polyopv1alpha1.DescribeResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DescribeTimeout)
	defer cancel()
	resp, err := c.svc.Describe(ctx, &polyopv1alpha1.DescribeRequest{
		ProtocolVersion: description.ProtocolVersion,
		HostVersion:     hostVersion,
		ClusterAddress:  c.opts.ClusterAddress,
	})
	if err != nil {
		switch status.Code(err) {
		case codes.Unimplemented:
			return nil, fmt.Errorf("sidecar at %s does not implement %s (it may speak another protocol version than %s): %w",
				c.opts.Address, polyopv1alpha1.SidecarService_ServiceDesc.ServiceName, description.ProtocolVersion, err)
		case codes.FailedPrecondition:
			return nil, fmt.Errorf("sidecar at %s refused the host's protocol version %s: %s",
				c.opts.Address, description.ProtocolVersion, status.Convert(err).Message())
		}
		return nil, fmt.Errorf("describe call to sidecar at %s: %w", c.opts.Address, err)
	}
	return resp, nil
}

// Reconcile sends one ReconcileRequest, with Options.ReconcileTimeout as its
// deadline (or ctx's, when earlier). A status or desired child longer than
// Options.MaxObjectSize is not read: the answer comes back without it, with
// a TooLargeError for each (joined).
//
// A call the sidecar does not answer by its deadline fails with a
// *DeadlineError. On a stream the object is then held until the sidecar
// answers, and a call for it meanwhile fails with an *InFlightError without
// reaching the sidecar (see OnRelease). A ctx cancelled before the deadline
// cancels the call at once.
func (c *Client) Reconcile(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
	if err := c.inFlight(methodReconcile, req); err != nil {
		return nil, err
	}
	deadline := c.deadline(ctx)
	answer := &reconcileAnswer{resp: &polyopv1alpha1.ReconcileResponse{}, limit: c.opts.MaxObjectSize}
	err := errUnaryFallback
	if c.streams.on.Load() {
		err = c.callOnStream(ctx, deadline, methodReconcile, req.GetController(), &polyopv1alpha1.ReconcileStreamRequest{
			Call: &polyopv1alpha1.ReconcileStreamRequest_Reconcile{Reconcile: req},
		}, &streamAnswer{reconcile: answer, limit: c.opts.MaxObjectSize})
	}
	if errors.Is(err, errUnaryFallback) {
		err = c.unary(ctx, deadline, methodReconcile, req, func(ctx context.Context) error {
			return c.conn.Invoke(ctx, polyopv1alpha1.SidecarService_Reconcile_FullMethodName, req, answer, grpc.ForceCodecV2(answerCodec{}))
		})
	}
	if err != nil {
		return nil, err
	}
	return answer.resp, errors.Join(answer.tooLarge...)
}

// Finalize sends one FinalizeRequest, with Options.ReconcileTimeout as its
// deadline (or ctx's, when earlier), as Reconcile sends a ReconcileRequest.
func (c *Client) Finalize(ctx context.Context, req *polyopv1alpha1.FinalizeRequest) (*polyopv1alpha1.FinalizeResponse, error) {
	if err := c.inFlight(methodFinalize, req); err != nil {
		return nil, err
	}
	deadline := c.deadline(ctx)
	if c.streams.on.Load() {
		answer := &streamAnswer{}
		err := c.callOnStream(ctx, deadline, methodFinalize, req.GetController(), &polyopv1alpha1.ReconcileStreamRequest{
			Call: &polyopv1alpha1.ReconcileStreamRequest_Finalize{Finalize: req},
		}, answer)
		if !errors.Is(err, errUnaryFallback) {
			if err != nil {
				return nil, err
			}
			return answer.finalize, nil
		}
	}
	var resp *polyopv1alpha1.FinalizeResponse
	err := c.unary(ctx, deadline, methodFinalize, req, func(ctx context.Context) (err error) {
		resp, err = c.svc.Finalize(ctx, req)
		return err
	})
	return resp, err
}

// deadline is a call's: Options.ReconcileTimeout from now, or ctx's when
// earlier.
func (c *Client) deadline(ctx context.Context) time.Time {
	deadline := time.Now().Add(c.opts.ReconcileTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		return d
	}
	return deadline
}

// unary makes a unary call of req with invoke, until deadline. gRPC cancels
// it in the sidecar at the deadline: the object is not held, and the call
// fails with a *DeadlineError.
func (c *Client) unary(ctx context.Context, deadline time.Time, method string, req callTarget, invoke func(context.Context) error) error {
	timeout := time.Until(deadline)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err := invoke(ctx)
	if status.Code(err) == codes.DeadlineExceeded && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &DeadlineError{Method: method, Controller: req.GetController(), Object: describeObject(req), Timeout: timeout}
	}
	return err
}

// IsUnavailable reports whether err means the sidecar could not be reached at
// all (as opposed to a sidecar that answered with an error): there is no
// connection, or it broke, or the sidecar ended the call's stream without
// answering it (its process went away). One call running out of time is
// not: that is its object's failure (a *DeadlineError), whatever the
// sidecar's other calls do. Nor is an UNAVAILABLE the sidecar answered.
func IsUnavailable(err error) bool {
	var answered *answeredError
	return status.Code(err) == codes.Unavailable && !errors.As(err, &answered)
}
