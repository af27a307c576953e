package cluster

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/polyop/polyop/internal/fencing"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// writeMethods are the service's methods that write to the API server.
var writeMethods = map[string]bool{
	polyopv1alpha1.ClusterService_Create_FullMethodName:      true,
	polyopv1alpha1.ClusterService_Update_FullMethodName:      true,
	polyopv1alpha1.ClusterService_Patch_FullMethodName:       true,
	polyopv1alpha1.ClusterService_Delete_FullMethodName:      true,
	polyopv1alpha1.ClusterService_RecordEvent_FullMethodName: true,
}

// fenceWrites is a unary interceptor that serves a write only while the
// replica holds its lease (Options.Fence), with the end of its term as the
// write's deadline: a sidecar of a replica paused past its lease, or one
// whose call outlived the term, writes nothing from its stale view. The
// refusal is UNAVAILABLE, which the SDKs' clients retry.
func (s *Server) fenceWrites(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if s.opts.Fence == nil || !writeMethods[info.FullMethod] {
		return handler(ctx, req)
	}
	term := s.opts.Fence.Term()
	wctx, cancel, err := fencing.WriteContext(ctx, s.opts.Fence, term)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "%s: not written: %v", method(info.FullMethod), err)
	}
	defer cancel()
	resp, err := handler(wctx, req)
	if err != nil && fencing.IsLapsed(context.Cause(wctx)) {
		return nil, status.Errorf(codes.Unavailable, "%s: not written: %v", method(info.FullMethod), context.Cause(wctx))
	}
	return resp, err
}

// method is the last part of a full method name.
func method(full string) string { return full[strings.LastIndex(full, "/")+1:] }
