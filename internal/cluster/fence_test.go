package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/polyop/polyop/internal/fencing"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func TestWritesAreServedOnlyWhileTheReplicaHoldsItsLease(t *testing.T) {
	t.Parallel()
	held := fencing.Term{Number: 2, Until: time.Now().Add(time.Hour), Held: true, Lease: "shard Lease ns/l"}
	for name, tc := range map[string]struct {
		fence    fencing.Fence
		method   string
		wantCode codes.Code
		wantCall bool
	}{
		"if the replica holds its lease, then a write is served before the term's end": {
			fence: fencing.Func(func() fencing.Term { return held }), method: polyopv1alpha1.ClusterService_Patch_FullMethodName, wantCall: true,
		},
		"if the replica does not hold its lease, then a write is refused as unavailable": {
			fence:  fencing.Func(func() fencing.Term { return fencing.Term{Number: 2, Lease: "shard Lease ns/l"} }),
			method: polyopv1alpha1.ClusterService_Create_FullMethodName, wantCode: codes.Unavailable,
		},
		"if the replica does not hold its lease, then a read is still served": {
			fence:  fencing.Func(func() fencing.Term { return fencing.Term{Number: 2} }),
			method: polyopv1alpha1.ClusterService_Get_FullMethodName, wantCall: true,
		},
		"if the host has no lease, then every write is served": {
			method: polyopv1alpha1.ClusterService_Delete_FullMethodName, wantCall: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := &Server{opts: Options{Fence: tc.fence}}
			called := false
			_, err := s.fenceWrites(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: tc.method}, func(ctx context.Context, _ any) (any, error) {
				called = true
				if d, ok := ctx.Deadline(); tc.fence != nil && tc.method != polyopv1alpha1.ClusterService_Get_FullMethodName && (!ok || !d.Equal(held.Until)) {
					t.Errorf("the write's deadline is %v (%v), want the term's end", d, ok)
				}
				return nil, nil
			})
			if called != tc.wantCall || status.Code(err) != tc.wantCode {
				t.Fatalf("called %v, error %v; want called %v, code %v", called, err, tc.wantCall, tc.wantCode)
			}
			if err != nil && !strings.Contains(err.Error(), "does not hold shard Lease ns/l") {
				t.Errorf("the refusal %q does not say which lease", err)
			}
		})
	}
}
