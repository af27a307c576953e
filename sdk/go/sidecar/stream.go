package sidecar

import (
	"context"
	"errors"
	"io"
	"sync"

	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// ReconcileStream serves the host's Reconcile and Finalize calls as messages
// of one stream, one call after the other, each exactly as the unary
// Reconcile or Finalize serves it (see streamCall). The host opens one per
// worker.
//
// A call is answered once its reconciler has returned, also past the call's
// deadline, when the reconciler's context is done: the host holds the object
// until that answer, so that no second call for it runs beside the first.
//
// The stream ends when the host ends it, or when the Server stops: at once
// if no call is in flight on it, else once the call is answered.
func (s *service) ReconcileStream(stream grpc.BidiStreamingServer[polyopv1alpha1.ReconcileStreamRequest, polyopv1alpha1.ReconcileStreamResponse]) error {
	if !s.opts.reconcileStream() {
		return status.Error(codes.Unimplemented, "this sidecar serves no ReconcileStream (Options.ReconcileStream is false): call Reconcile and Finalize")
	}
	// The calls are read, run and answered in order on a goroutine of
	// their own, so that this one can end the stream when the Server stops
	// while it waits for a call. It reads the next request only once it has
	// answered the last, so a host that sends many at once waits for gRPC's
	// flow control: memory stays bounded.
	var (
		mu      sync.Mutex
		busy    bool // a call is in flight
		stopped bool // the stream is ending: no more calls
	)
	done := make(chan error, 1)
	go func() {
		ctx := stream.Context()
		for {
			req, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil // the host closed the stream
				}
				done <- err
				return
			}
			mu.Lock()
			if stopped {
				mu.Unlock()
				return
			}
			busy = true
			mu.Unlock()
			err = stream.Send(s.streamCall(ctx, req))
			mu.Lock()
			busy = false
			ending := stopped
			mu.Unlock()
			if err != nil || ending {
				// A failed send ends the stream, and so does a stop that
				// came while this call was in flight, now it is answered.
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		return err
	case <-s.stopping:
	}
	mu.Lock()
	inFlight := busy
	stopped = true
	mu.Unlock()
	if inFlight {
		// The call in flight is answered; then the loop reads no more.
		if err := <-done; err != nil {
			return err
		}
	}
	return status.Error(codes.Unavailable, "the sidecar is stopping")
}

// streamCall runs one call of a ReconcileStream as the unary method of its
// kind runs it, Reconcile or Finalize: with the request's timeout as its
// deadline, in a server span whose parent is the request's trace context,
// and with the error a unary call would end with as its CallStatus.
func (s *service) streamCall(ctx context.Context, req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse {
	if t := req.GetTimeout(); t != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.AsDuration())
		defer cancel()
	}
	resp := &polyopv1alpha1.ReconcileStreamResponse{Id: req.GetId()}
	var err error
	switch call := req.GetCall().(type) {
	case *polyopv1alpha1.ReconcileStreamRequest_Reconcile:
		ctx, span := s.startStreamSpan(ctx, "Reconcile", req)
		var r *polyopv1alpha1.ReconcileResponse
		if r, err = s.Reconcile(ctx, call.Reconcile); err == nil {
			resp.Result = &polyopv1alpha1.ReconcileStreamResponse_Reconcile{Reconcile: r}
		}
		endStreamSpan(span, err)
	case *polyopv1alpha1.ReconcileStreamRequest_Finalize:
		ctx, span := s.startStreamSpan(ctx, "Finalize", req)
		var r *polyopv1alpha1.FinalizeResponse
		if r, err = s.Finalize(ctx, call.Finalize); err == nil {
			resp.Result = &polyopv1alpha1.ReconcileStreamResponse_Finalize{Finalize: r}
		}
		endStreamSpan(span, err)
	default:
		err = status.Errorf(codes.InvalidArgument, "sidecar %q: call %d on the ReconcileStream carries no Reconcile or Finalize request", s.opts.Name, req.GetId())
		s.log.Info("Refused a call on a ReconcileStream", "id", req.GetId(), "reason", err.Error())
	}
	if err != nil {
		st := callStatus(err)
		resp.Result = &polyopv1alpha1.ReconcileStreamResponse_Error{Error: &polyopv1alpha1.CallStatus{
			Code:    int32(st.Code()), //nolint:gosec // gRPC codes are small.
			Message: st.Message(),
		}}
	}
	return resp
}

// callStatus is the status a unary call whose handler returned err ends
// with, as gRPC's server makes it: err's own status, or that of a context
// error, else UNKNOWN with err's text.
func callStatus(err error) *status.Status {
	if st, ok := status.FromError(err); ok {
		return st
	}
	return status.FromContextError(err)
}

// startStreamSpan starts the server span of a call on a stream, as otelgrpc
// starts that of a unary call (it traces the stream as a whole, and is told
// to leave it alone): a child of the request's trace context, with its
// baggage. The span is nil when the Server does not trace.
func (s *service) startStreamSpan(ctx context.Context, method string, req *polyopv1alpha1.ReconcileStreamRequest) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, nil
	}
	ctx = tracing.Propagator().Extract(ctx, propagation.MapCarrier(req.GetTraceContext()))
	fullMethod := polyopv1alpha1.SidecarService_ServiceDesc.ServiceName + "/" + method
	return s.tracer.Start(ctx, fullMethod, tracing.CallSpanOptions(trace.SpanKindServer, fullMethod)...)
}

// endStreamSpan ends the span of a call on a stream, if any, with its
// status, as otelgrpc ends that of a unary call: status Error for the codes
// that mean the server failed.
func endStreamSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	st := status.New(codes.OK, "")
	if err != nil {
		st = callStatus(err)
	}
	span.SetAttributes(tracing.RPCStatusCode(st.Code()))
	switch st.Code() {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		span.SetStatus(otelcodes.Error, st.Message())
	}
	span.End()
}
