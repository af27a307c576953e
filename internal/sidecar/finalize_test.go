package sidecar

import (
	"context"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func TestDescribeSendsTheClusterAddressAndFinalizeIsCalled(t *testing.T) {
	t.Parallel()
	svc := &fakesidecar.Fake{
		OnDescribe: fakesidecar.Answer(func(*polyopv1alpha1.DescribeRequest) *polyopv1alpha1.DescribeResponse {
			return &polyopv1alpha1.DescribeResponse{ProtocolVersion: description.ProtocolVersion, Name: "s", Controllers: []*polyopv1alpha1.ControllerDescription{{
				Name: "c", ForKind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Finalizer: "example.com/f",
			}}}
		}),
		OnFinalize: fakesidecar.Answer(func(req *polyopv1alpha1.FinalizeRequest) *polyopv1alpha1.FinalizeResponse {
			return &polyopv1alpha1.FinalizeResponse{RequeueAfter: durationpb.New(time.Duration(req.GetRetries()) * time.Second)}
		}),
	}
	addr, hs := fakesidecar.Serve(t, svc)
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
	if got := svc.Describes()[0].GetClusterAddress(); got != "unix:///run/polyop/cluster.sock" {
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
