package sidecar

import (
	"context"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	polyopv1alpha1 "github.com/polyop/polyop/gen/go/polyop/v1alpha1"
	"github.com/polyop/polyop/internal/description"
)

// finalizingSidecar records the DescribeRequest and answers Finalize.
type finalizingSidecar struct {
	polyopv1alpha1.UnimplementedSidecarServiceServer
	described chan *polyopv1alpha1.DescribeRequest
}

func (f *finalizingSidecar) Describe(_ context.Context, req *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error) {
	f.described <- req
	return &polyopv1alpha1.DescribeResponse{ProtocolVersion: description.ProtocolVersion, Name: "s", Controllers: []*polyopv1alpha1.ControllerDescription{{
		Name: "c", ForKind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Finalizer: "example.com/f",
	}}}, nil
}

func (f *finalizingSidecar) Finalize(_ context.Context, req *polyopv1alpha1.FinalizeRequest) (*polyopv1alpha1.FinalizeResponse, error) {
	return &polyopv1alpha1.FinalizeResponse{RequeueAfter: durationpb.New(time.Duration(req.GetRetries()) * time.Second)}, nil
}

func TestDescribeSendsTheClusterAddressAndFinalizeIsCalled(t *testing.T) {
	t.Parallel()
	svc := &finalizingSidecar{described: make(chan *polyopv1alpha1.DescribeRequest, 1)}
	addr, hs := serve(t, svc, true)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	c, err := New(Options{Address: addr, ClusterAddress: "unix:///run/polyop/cluster.sock"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	desc, err := c.Describe(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if got := (<-svc.described).GetClusterAddress(); got != "unix:///run/polyop/cluster.sock" {
		t.Errorf("DescribeRequest.cluster_address = %q, want the host's", got)
	}
	if desc.Controllers[0].Finalizer != "example.com/f" {
		t.Errorf("finalizer %q", desc.Controllers[0].Finalizer)
	}
	resp, err := c.Finalize(ctx, &polyopv1alpha1.FinalizeRequest{Controller: "c", Retries: 3})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetRequeueAfter().AsDuration() != 3*time.Second {
		t.Errorf("Finalize answered %v", resp)
	}
}
