package sidecar_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	sigsjson "sigs.k8s.io/json"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// bareKey is the metadata key that marks a Reconcile call as a bare-unary
// baseline's.
const bareKey = "polyop-bench-bare-unary"

// bareStreamMethod is the bidirectional stream that bareStream serves: a
// ReconcileRequest in, a ReconcileResponse out, as many times as the client
// sends.
const bareStreamMethod = "/polyop.bench.v1.Hop/Stream"

// bareUnary is a server option for a Go SDK sidecar: a unary interceptor that
// answers a Reconcile call marked with bareKey itself, after only decoding the
// object into a MaintenanceWindow as the SDK decodes it (case-sensitively,
// integers kept), with the response the SDK gave to the first marked call,
// which it lets through. Every unmarked call goes on to the SDK. So the call
// crosses the same server, socket, method, codec and bytes as a Reconcile,
// with polyop's own work left out.
func bareUnary() grpc.ServerOption {
	var recorded atomic.Pointer[polyopv1alpha1.ReconcileResponse]
	return grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if len(md[bareKey]) == 0 {
			return handler(ctx, req)
		}
		r, ok := req.(*polyopv1alpha1.ReconcileRequest)
		if !ok {
			return nil, status.Error(codes.InvalidArgument, "the bare-unary baseline answers only Reconcile")
		}
		if resp := recorded.Load(); resp != nil {
			return resp, decodeLikeTheSDK(r)
		}
		resp, err := handler(ctx, req)
		if err == nil {
			recorded.Store(resp.(*polyopv1alpha1.ReconcileResponse))
		}
		return resp, err
	})
}

// bareStream is a server option for a Go SDK sidecar whose Reconcile is
// reconcile: it serves bareStreamMethod, answering each ReconcileRequest on the
// stream as bareUnary answers a marked call (the first through reconcile, the
// others with its answer after decoding the object).
func bareStream(reconcile func(context.Context, *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error)) grpc.ServerOption {
	var recorded atomic.Pointer[polyopv1alpha1.ReconcileResponse]
	return grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		if method, _ := grpc.MethodFromServerStream(stream); method != bareStreamMethod {
			return status.Errorf(codes.Unimplemented, "unknown method %s", method)
		}
		for {
			req := &polyopv1alpha1.ReconcileRequest{}
			if err := stream.RecvMsg(req); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return err
			}
			resp := recorded.Load()
			if resp == nil {
				var err error
				if resp, err = reconcile(stream.Context(), req); err != nil {
					return err
				}
				recorded.Store(resp)
			} else if err := decodeLikeTheSDK(req); err != nil {
				return err
			}
			if err := stream.SendMsg(resp); err != nil {
				return err
			}
		}
	})
}

// decodeLikeTheSDK decodes the request's object as the Go SDK decodes it for
// a reconciler of MaintenanceWindows.
func decodeLikeTheSDK(req *polyopv1alpha1.ReconcileRequest) error {
	var mw v1.MaintenanceWindow
	return sigsjson.UnmarshalCaseSensitivePreserveInts(req.GetObject(), &mw)
}

// reconcileRequest is the ReconcileRequest the host sends for obj.
func reconcileRequest(b *testing.B, obj *object.Object) *polyopv1alpha1.ReconcileRequest {
	raw, err := obj.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	return &polyopv1alpha1.ReconcileRequest{
		Controller: "maintenancewindow",
		Kind:       &polyopv1alpha1.GroupVersionKind{Group: v1.GroupVersion.Group, Version: v1.GroupVersion.Version, Kind: "MaintenanceWindow"},
		Key:        &polyopv1alpha1.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName()},
		Object:     raw,
	}
}

// bareUnaryCall returns the bare-unary baseline's call over conn, a plain gRPC
// connection to a sidecar served with bareUnary: the ReconcileRequest for obj,
// encoded once, sent marked with bareKey. It makes the first call, which the
// SDK answers, and checks that the answer carries a status.
func bareUnaryCall(b *testing.B, obj *object.Object, conn *grpc.ClientConn) func(context.Context) error {
	req := reconcileRequest(b, obj)
	svc := polyopv1alpha1.NewSidecarServiceClient(conn)
	marked := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(bareKey, "1"))
	first, err := svc.Reconcile(marked, req)
	if err != nil {
		b.Fatal(err)
	}
	if first.GetError() != nil || len(first.GetStatus()) == 0 {
		b.Fatalf("the SDK answered %v, want a status and no error", first)
	}
	return func(context.Context) error {
		resp, err := svc.Reconcile(marked, req)
		if err == nil && len(resp.GetStatus()) != len(first.GetStatus()) {
			err = fmt.Errorf("the bare-unary baseline answered a status of %d bytes, want %d", len(resp.GetStatus()), len(first.GetStatus()))
		}
		return err
	}
}

// bareStreamCall returns the bare-stream baseline's call over conn, a plain
// gRPC connection to a sidecar served with bareStream: the ReconcileRequest for
// obj, encoded once, sent on one long-lived stream, and its answer received.
func bareStreamCall(b *testing.B, obj *object.Object, conn *grpc.ClientConn) func(context.Context) error {
	req := reconcileRequest(b, obj)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, bareStreamMethod)
	if err != nil {
		b.Fatal(err)
	}
	return func(context.Context) error {
		if err := stream.SendMsg(req); err != nil {
			return err
		}
		resp := &polyopv1alpha1.ReconcileResponse{}
		if err := stream.RecvMsg(resp); err != nil {
			return err
		}
		if len(resp.GetStatus()) == 0 {
			return errors.New("the bare-stream baseline answered no status")
		}
		return nil
	}
}
