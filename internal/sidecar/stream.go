package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// streams is the pool of the client's ReconcileStreams: a Reconcile or
// Finalize call takes an idle stream, or opens one when none is idle, sends
// its request, waits for the answer and puts the stream back. There are
// never more streams than calls made at once, and calls held past their
// deadline (in practice, the workers of the host's controllers and the
// objects held), and each carries one call at a time, as the protocol asks.
//
// A call whose deadline passes is not cancelled: the host holds its object
// (see heldObjects) and a goroutine waits for the late answer, which it
// discards, and then puts the stream back; it cancels the stream if no answer
// comes within the grace period. A call whose caller gives up (its context
// is cancelled: the host is stopping) has its stream cancelled at once, so
// that the sidecar sees the call's context cancelled. A stream that failed
// or carried a malformed answer is dropped.
type streams struct {
	conn *grpc.ClientConn
	// address is the sidecar's, for logs.
	address string
	// grace is how long after its deadline a call is waited for before its
	// stream is cancelled.
	grace time.Duration
	// ctx is every stream's context: Close cancels it, which ends the
	// streams, idle, busy or held.
	ctx    context.Context
	cancel context.CancelFunc
	// on: the sidecar announced ReconcileStream and the host did not turn
	// streams off. It goes off for good when opening a stream fails with
	// UNIMPLEMENTED.
	on atomic.Bool

	// opened counts the streams opened, for tests.
	opened atomic.Int64

	held heldObjects

	mu   sync.Mutex
	idle []*callStream
}

// callStream is one ReconcileStream.
type callStream struct {
	stream grpc.ClientStream
	cancel context.CancelFunc
	// lastID is the id of the stream's last call.
	lastID uint64
}

func newStreams(conn *grpc.ClientConn, address string, grace time.Duration) *streams {
	ctx, cancel := context.WithCancel(context.Background())
	return &streams{conn: conn, address: address, grace: grace, ctx: ctx, cancel: cancel}
}

// close ends every stream.
func (p *streams) close() {
	p.on.Store(false)
	p.cancel()
	p.mu.Lock()
	p.idle = nil
	p.mu.Unlock()
}

// take returns an idle stream, or nil when none is.
func (p *streams) take() *callStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	s := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	return s
}

// put makes s idle again, unless the client is closed.
func (p *streams) put(s *callStream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		s.cancel()
		return
	}
	p.idle = append(p.idle, s)
}

// open opens a new stream.
func (p *streams) open() (*callStream, error) {
	ctx, cancel := context.WithCancel(p.ctx)
	stream, err := p.conn.NewStream(ctx, reconcileStreamDesc, polyopv1alpha1.SidecarService_ReconcileStream_FullMethodName,
		grpc.ForceCodecV2(answerCodec{}))
	if err != nil {
		cancel()
		return nil, err
	}
	p.opened.Add(1)
	return &callStream{stream: stream, cancel: cancel}, nil
}

var reconcileStreamDesc = &polyopv1alpha1.SidecarService_ServiceDesc.Streams[0]

// errUnaryFallback tells a caller of streams.call that the sidecar serves no
// ReconcileStream: the call was not made, and must be made as a unary call.
var errUnaryFallback = errors.New("the sidecar does not serve ReconcileStream")

// callOnStream makes the call of req on a stream, in a span of its own, and
// counts it in the call metrics as its unary method. deadline is the call's:
// past it the object is held (see streams). It returns errUnaryFallback
// when the sidecar turns out to serve no streams: the call was not made, and
// is not counted.
func (c *Client) callOnStream(ctx context.Context, deadline time.Time, method, controller string, req *polyopv1alpha1.ReconcileStreamRequest, answer *streamAnswer) error {
	start := time.Now()
	answer.method = method
	ctx, span := c.startStreamSpan(ctx, method, req)
	err := c.streams.call(ctx, deadline, req, answer)
	if errors.Is(err, errUnaryFallback) {
		if span != nil {
			span.End()
		}
		return err
	}
	endStreamSpan(span, err)
	// A held call's late answer may be read into answer at any time: only
	// an answered call's is looked at.
	var reply any
	if err == nil {
		reply = answer.finalize
		if answer.reconcile != nil && method == methodReconcile {
			reply = answer.reconcile
		}
	}
	observe(method, controller, start, reply, err)
	return err
}

// The unary methods whose calls go on streams.
const (
	methodReconcile = "Reconcile"
	methodFinalize  = "Finalize"
)

// call sends req (whose call is set) on a stream and waits for its answer
// until deadline, or until ctx is cancelled. answer holds the answer after.
// It returns errUnaryFallback when the sidecar turns out to serve no
// streams, and turns streams off.
func (p *streams) call(ctx context.Context, deadline time.Time, req *polyopv1alpha1.ReconcileStreamRequest, answer *streamAnswer) error {
	if err := ctx.Err(); err != nil {
		// What a unary call returns; no idle stream is spent on it.
		return status.FromContextError(err).Err()
	}
	timeout := time.Until(deadline)
	if timeout <= 0 {
		return status.FromContextError(context.DeadlineExceeded).Err()
	}
	req.Timeout = durationpb.New(timeout)
	for {
		s, fresh := p.take(), false
		if s == nil {
			var err error
			if s, err = p.open(); err != nil {
				return err
			}
			fresh = true
		}
		sent, ok, err := p.callOn(ctx, s, deadline, req, answer)
		if ok {
			p.put(s)
		}
		switch {
		case err == nil:
			return nil
		case fresh && !ok && status.Code(err) == codes.Unimplemented:
			// Opening the stream failed: the sidecar announced streams, but
			// does not serve them (a proxy in between, say). Unary calls
			// from now on. (A CallStatus UNIMPLEMENTED is an answer.)
			if p.on.CompareAndSwap(true, false) {
				logf.FromContext(ctx).Info("the sidecar announced ReconcileStream but does not serve it: calling the unary Reconcile and Finalize from now on",
					"reason", status.Convert(err).Message())
			}
			return errUnaryFallback
		case !sent && !fresh && ctx.Err() == nil:
			// An idle stream that had ended before the call (the sidecar
			// restarted or stopped since its last call): the request never
			// left, so it goes on the next idle stream, or a new one. Each
			// such stream is dropped, so this ends.
			continue
		}
		return err
	}
}

// callOn sends req on s and reads its answer. sent tells whether the request
// went out: a stream the sidecar had ended before refuses it. ok tells
// whether s can carry the next call: it was answered, with a result or a
// CallStatus, in time. When ctx is cancelled first, s is cancelled at once.
// When the deadline passes first, the call fails with a *DeadlineError and
// s stays with the call: its object is held until the answer arrives, which
// is discarded (see hold). Otherwise, when !ok, s has been cancelled.
func (p *streams) callOn(ctx context.Context, s *callStream, deadline time.Time, req *polyopv1alpha1.ReconcileStreamRequest, answer *streamAnswer) (sent, ok bool, err error) {
	s.lastID++
	req.Id = s.lastID
	// The stream is cancelled a grace period after the deadline, whatever
	// happens before: a send that blocks, or a sidecar that never answers a
	// held call.
	grace := time.AfterFunc(time.Until(deadline)+p.grace, s.cancel)
	if err := s.stream.SendMsg(req); err != nil {
		grace.Stop()
		s.cancel()
		if errors.Is(err, io.EOF) {
			// The stream had ended: its status says why.
			return false, false, streamEnded(s.stream.RecvMsg(&streamAnswer{}))
		}
		return false, false, err
	}
	// The answer is read on a goroutine of its own, so that the caller can
	// return at the deadline while the stream waits for it.
	answered := make(chan error, 1)
	go func() { answered <- s.stream.RecvMsg(answer) }()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case err := <-answered:
		grace.Stop()
		return p.answered(s, req, answer, err)
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The caller gave up: the host is stopping.
			grace.Stop()
			s.cancel()
			<-answered //nolint:errcheck // The stream ends with the caller's cancellation, the call's error.
			return true, false, status.FromContextError(ctx.Err()).Err()
		}
	case <-timer.C:
	}
	return true, false, p.hold(ctx, s, req, answer, answered, grace)
}

// answered is the outcome of a call on s whose answer, or the stream's end,
// came: see callOn.
func (p *streams) answered(s *callStream, req *polyopv1alpha1.ReconcileStreamRequest, answer *streamAnswer, err error) (sent, ok bool, _ error) {
	if err != nil {
		s.cancel()
		return true, false, streamEnded(err)
	}
	if err := answer.check(req); err != nil {
		// A CallStatus is an answer: the stream goes on.
		var malformed *MalformedAnswerError
		if errors.As(err, &malformed) {
			s.cancel()
			return true, false, err
		}
		return true, true, err
	}
	return true, true, nil
}

// hold holds the object of req, whose deadline passed, until its answer
// arrives on answered (the answer is read into answer, and discarded), s
// ends, or grace cancels s; then it puts s back if it can carry another
// call, and releases the object. It returns the call's *DeadlineError.
func (p *streams) hold(ctx context.Context, s *callStream, req *polyopv1alpha1.ReconcileStreamRequest, answer *streamAnswer, answered <-chan error, grace *time.Timer) error {
	target := streamTarget(req)
	key := keyOf(target)
	deadlineErr := &DeadlineError{
		Method: answer.method, Controller: key.controller, Object: describeObject(target),
		Timeout: req.GetTimeout().AsDuration(), Held: true, Grace: p.grace,
	}
	p.held.hold(key)
	log := logf.FromContext(ctx)
	go func() {
		err := <-answered
		if !grace.Stop() {
			// The grace period passed and s was cancelled; or the client
			// was closed meanwhile, which says nothing.
			if p.ctx.Err() == nil {
				heldCallsCancelled.WithLabelValues(key.controller).Inc()
				log.Error(fmt.Errorf("%s; the sidecar at %s had not answered it %s after the deadline either", deadlineErr.Error(), p.address, p.grace),
					"Cancelled the call's stream and released the object: the sidecar may still be running the call",
					"sidecar", p.address, "call", deadlineErr.Method, "object", deadlineErr.Object)
			}
		} else {
			_, ok, err := p.answered(s, req, answer, err)
			log.V(1).Info("Discarded the late answer of a call past its deadline, and released the object",
				"sidecar", p.address, "call", deadlineErr.Method, "object", deadlineErr.Object, "answer", lateAnswer(err))
			if ok {
				p.put(s)
			}
		}
		p.held.release(key)
	}()
	return deadlineErr
}

// lateAnswer says what a held call's late answer was, for a log.
func lateAnswer(err error) string {
	if err == nil {
		return "a result"
	}
	return status.Convert(err).Message()
}

// streamTarget is the Reconcile or Finalize request in req.
func streamTarget(req *polyopv1alpha1.ReconcileStreamRequest) callTarget {
	if f := req.GetFinalize(); f != nil {
		return f
	}
	return req.GetReconcile()
}

// streamEnded is the error of a call whose stream ended without answering
// it: the stream's status, as the same unary call would have ended.
func streamEnded(err error) error {
	if errors.Is(err, io.EOF) {
		return status.Error(codes.Unavailable, "the sidecar ended the stream without answering the call")
	}
	return err
}

// MalformedAnswerError is an answer on a ReconcileStream that does not fit
// its call: another id, no result, or a result of the other kind. The call
// fails with it, and the stream is dropped.
type MalformedAnswerError struct {
	// Method is the call: "Reconcile" or "Finalize".
	Method string
	// Controller is the controller the call was for.
	Controller string
	// Object is the object's key, namespace/name or name.
	Object string
	// Problem says what is wrong with the answer.
	Problem string
}

func (e *MalformedAnswerError) Error() string {
	return fmt.Sprintf("controller %q: the sidecar's answer to the %s call for %s on its ReconcileStream is malformed: %s",
		e.Controller, e.Method, e.Object, e.Problem)
}

// GRPCStatus makes the error count as a transport error, a message the host
// cannot read, as a unary answer that does not decode does.
func (e *MalformedAnswerError) GRPCStatus() *status.Status {
	return status.New(codes.Internal, e.Error())
}

// streamAnswer is a ReconcileStreamResponse, as answerCodec decodes it: a
// ReconcileResponse in it is read as a reconcileAnswer, with its status and
// desired children bounded.
type streamAnswer struct {
	// method is the call's unary method ("Reconcile" or "Finalize"), set
	// before the answer is read: the metrics of message sizes use it.
	method string
	// limit bounds a ReconcileResponse's status and desired children, as
	// reconcileAnswer's.
	limit int
	id    uint64
	// kind is the field number of the result: 0 for none.
	kind      int32
	reconcile *reconcileAnswer
	finalize  *polyopv1alpha1.FinalizeResponse
	err       *polyopv1alpha1.CallStatus
}

// check tells whether a is an answer to req, a malformed answer error if
// not. A CallStatus answer becomes its status error.
func (a *streamAnswer) check(req *polyopv1alpha1.ReconcileStreamRequest) error {
	var controller string
	var key *polyopv1alpha1.ObjectKey
	var want int32
	switch c := req.GetCall().(type) {
	case *polyopv1alpha1.ReconcileStreamRequest_Reconcile:
		controller, key, want = c.Reconcile.GetController(), c.Reconcile.GetKey(), streamReconcileField
	case *polyopv1alpha1.ReconcileStreamRequest_Finalize:
		controller, key, want = c.Finalize.GetController(), c.Finalize.GetKey(), streamFinalizeField
	}
	malformed := func(format string, args ...any) error {
		object := key.GetName()
		if ns := key.GetNamespace(); ns != "" {
			object = ns + "/" + object
		}
		return &MalformedAnswerError{Method: a.method, Controller: controller, Object: object, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case a.id != req.GetId():
		return malformed("it answers call %d, not call %d", a.id, req.GetId())
	case a.kind == streamErrorField:
		code := codes.Code(a.err.GetCode()) //nolint:gosec // A code out of range is reported as it is.
		if code == codes.OK {
			return malformed("its CallStatus has code OK (0)")
		}
		return &answeredError{status.Error(code, a.err.GetMessage())}
	case a.kind == 0:
		return malformed("it has no result")
	case a.kind != want:
		return malformed("it answers with a %s, not a %sResponse", streamResultName(a.kind), a.method)
	}
	return nil
}

func streamResultName(kind int32) string {
	switch kind {
	case streamReconcileField:
		return "ReconcileResponse"
	case streamFinalizeField:
		return "FinalizeResponse"
	}
	return "CallStatus"
}

// The field numbers of ReconcileStreamResponse's result.
const (
	streamReconcileField = 2
	streamFinalizeField  = 3
	streamErrorField     = 4
)

// startStreamSpan starts the client span of a call made on a stream, as the
// otelgrpc handler starts that of a unary call (it would trace the stream as
// a whole, and is told to leave it alone), and puts its trace context, and
// the caller's baggage, in req. The span is nil when the client does not
// trace.
func (c *Client) startStreamSpan(ctx context.Context, method string, req *polyopv1alpha1.ReconcileStreamRequest) (context.Context, trace.Span) {
	if c.tracer == nil {
		return ctx, nil
	}
	fullMethod := polyopv1alpha1.SidecarService_ServiceDesc.ServiceName + "/" + method
	ctx, span := c.tracer.Start(ctx, fullMethod, tracing.CallSpanOptions(trace.SpanKindClient, fullMethod)...)
	carrier := propagation.MapCarrier{}
	tracing.Propagator().Inject(ctx, carrier)
	if len(carrier) > 0 {
		req.TraceContext = carrier
	}
	return ctx, span
}

// endStreamSpan ends the span of a call made on a stream, if any, with its
// status, as otelgrpc ends that of a unary call.
func endStreamSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	s := status.Convert(err)
	span.SetAttributes(tracing.RPCStatusCode(s.Code()))
	if err != nil {
		span.SetStatus(otelcodes.Error, s.Message())
	}
	span.End()
}
