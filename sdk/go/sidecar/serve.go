package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Serve listens on address (see Listen) and serves the sidecar there until ctx
// is done; then it stops gracefully and returns nil.
func (s *Server) Serve(ctx context.Context, address string) error {
	lis, err := Listen(address)
	if err != nil {
		return err
	}
	return s.ServeListener(ctx, lis)
}

// ServeListener serves the sidecar on lis until ctx is done, then stops
// gracefully and returns nil. It closes lis.
//
// Next to polyop.v1alpha1.SidecarService it serves grpc.health.v1.Health,
// which reports SERVING (for the service "" and for SidecarService) while the
// server serves and NOT_SERVING once it stops. When ctx is done the server
// reports NOT_SERVING, ends health Watch streams, refuses new calls and waits
// for the calls in flight, at most Options.GracefulShutdownTimeout; then it
// closes the connections that remain.
//
// On a unix socket (or wherever Options.Reflection says) it serves gRPC
// server reflection too. With tracing on (Options.TracerProvider, or the
// OTEL_* variables; see package tracing) every call but health checks and
// reflection runs in a server span that continues the host's trace, and the
// spans not yet exported are flushed before it returns.
//
// A Server serves once, and needs at least one controller.
func (s *Server) ServeListener(ctx context.Context, lis net.Listener) error {
	names, err := s.startServing()
	if err != nil {
		_ = lis.Close()
		return err
	}

	tp, shutdownTracing, err := s.setUpTracing(ctx)
	if err != nil {
		_ = lis.Close()
		return fmt.Errorf("sidecar: tracing: %w", err)
	}
	defer func() {
		// The spans of the last calls; the context is done by now.
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdownTracing(flushCtx); err != nil {
			s.log.Error(err, "Flushing the last spans")
		}
	}()
	var tracingOpts []grpc.ServerOption
	if tp != nil {
		s.tracer = tp.Tracer(otelgrpc.ScopeName)
		tracingOpts = append(tracingOpts, tracedServer(tp))
		s.cluster.conn.setDialOptions(tracedClient(tp))
	}

	gs := grpc.NewServer(append(append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(s.opts.MaxMessageSize),
		grpc.MaxSendMsgSize(s.opts.MaxMessageSize),
		// Calls run on long-lived workers rather than a new goroutine each:
		// a reconcile's JSON decoding grows a fresh goroutine's stack every
		// time. A call finding every worker busy still gets a goroutine.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}, tracingOpts...), s.opts.ServerOptions...)...)
	polyopv1alpha1.RegisterSidecarServiceServer(gs, &service{Server: s})
	hs := newHealthService()
	healthpb.RegisterHealthServer(gs, hs)
	if s.reflectionOn(lis) {
		registerReflection(gs)
	}

	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(polyopv1alpha1.SidecarService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	s.log.Info("Serving", "address", lis.Addr().String(), "protocolVersion", ProtocolVersion, "controllers", names)

	select {
	case err := <-served:
		hs.shutdown()
		gs.Stop()
		if err == nil {
			err = errors.New("stopped unexpectedly")
		}
		return fmt.Errorf("sidecar: serving on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}

	s.log.Info("Stopping: waiting for the calls in flight", "timeout", s.opts.GracefulShutdownTimeout)
	hs.shutdown()
	close(s.stopping)
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	timeout := time.NewTimer(s.opts.GracefulShutdownTimeout)
	defer timeout.Stop()
	select {
	case <-stopped:
	case <-timeout.C:
		s.log.Info("Calls still in flight after the graceful shutdown timeout; closing their connections")
		gs.Stop()
		<-stopped
	}
	<-served //nolint:errcheck // Serve's error after a stop says only that it stopped; one before it was returned above.
	s.log.Info("Stopped")
	return nil
}

func (s *Server) startServing() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving {
		return nil, errors.New("sidecar: the server is already serving")
	}
	if len(s.order) == 0 && s.admission.empty() {
		return nil, errors.New("sidecar: no controllers or webhooks are registered: register at least one with NewControllerManagedBy or NewWebhookManagedBy before serving")
	}
	s.serving = true
	return append([]string(nil), s.order...), nil
}

// healthService is grpc's health server, except that Watch streams end when
// the Server stops, with a last NOT_SERVING: a graceful stop then waits for
// the calls that carry work, not for watchers that never hang up.
type healthService struct {
	*health.Server
	stopping chan struct{}
}

func newHealthService() *healthService {
	return &healthService{Server: health.NewServer(), stopping: make(chan struct{})}
}

// shutdown reports NOT_SERVING for every service and ends the Watch streams.
func (h *healthService) shutdown() {
	h.Shutdown()
	close(h.stopping)
}

func (h *healthService) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	watched := make(chan error, 1)
	go func() { watched <- h.Server.Watch(req, &watchStream{Health_WatchServer: stream, ctx: ctx}) }()
	select {
	case err := <-watched:
		return err
	case <-h.stopping:
		cancel()
		<-watched //nolint:errcheck // Watch ends with the cancellation just made; the answer below is what counts.
		_ = stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING})
		return status.Error(codes.Unavailable, "the sidecar is stopping")
	}
}

// watchStream is a Watch stream with a context of its own.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (w *watchStream) Context() context.Context { return w.ctx }
