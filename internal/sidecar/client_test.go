package sidecar

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func TestDescribeErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		describe func(context.Context, *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error)
		register bool
		want     string
	}{
		"if the sidecar does not serve the v1alpha1 service, the error says it may speak another version": {
			want: "may speak another protocol version than PROTOCOL_VERSION_V1ALPHA1",
		},
		"if the sidecar refuses the host's version, its message is passed on": {
			register: true,
			describe: func(context.Context, *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error) {
				return nil, status.Error(codes.FailedPrecondition, "I only speak v2")
			},
			want: "refused the host's protocol version PROTOCOL_VERSION_V1ALPHA1: I only speak v2",
		},
		"if the sidecar answers another protocol version, both are named": {
			register: true,
			describe: func(context.Context, *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error) {
				return &polyopv1alpha1.DescribeResponse{ProtocolVersion: 2}, nil
			},
			want: "the sidecar speaks 2, this host speaks PROTOCOL_VERSION_V1ALPHA1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var sc *fakesidecar.Fake
			if tc.register {
				sc = &fakesidecar.Fake{OnDescribe: tc.describe}
			}
			addr, _ := fakesidecar.Serve(t, sc)
			c, err := New(Options{Address: addr})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Describe(context.Background(), "test")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Describe error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestDescribeSendsTheHostsVersion(t *testing.T) {
	t.Parallel()
	var got *polyopv1alpha1.DescribeRequest
	addr, _ := fakesidecar.Serve(t, &fakesidecar.Fake{OnDescribe: func(_ context.Context, r *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error) {
		got = r
		return &polyopv1alpha1.DescribeResponse{
			ProtocolVersion: description.ProtocolVersion,
			Name:            "s",
			Controllers: []*polyopv1alpha1.ControllerDescription{{
				Name: "c", ForKind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			}},
		}, nil
	}})
	c, err := New(Options{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.Describe(context.Background(), "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	// A client without a ClusterAddress, as the offline commands (host
	// describe, webhooks, rbac) build it, announces none.
	if got.GetProtocolVersion() != polyopv1alpha1.ProtocolVersion_PROTOCOL_VERSION_V1ALPHA1 || got.GetHostVersion() != "1.2.3" || got.GetClusterAddress() != "" {
		t.Errorf("the sidecar got %v, want PROTOCOL_VERSION_V1ALPHA1, host version 1.2.3 and no cluster address", got)
	}
	if d.Name != "s" || len(d.Controllers) != 1 {
		t.Errorf("description = %+v", d)
	}
}

func TestWaitReady(t *testing.T) {
	t.Parallel()
	t.Run("if the sidecar becomes SERVING, WaitReady returns", func(t *testing.T) {
		t.Parallel()
		addr, hs := fakesidecar.Serve(t, nil)
		hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
		c, err := New(Options{Address: addr})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Check(nil); err == nil || !strings.Contains(err.Error(), "NOT_SERVING") {
			t.Errorf("Check = %v, want NOT_SERVING", err)
		}
		time.AfterFunc(200*time.Millisecond, func() { hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING) })
		if err := c.WaitReady(context.Background(), 10*time.Second, logr.Discard()); err != nil {
			t.Fatal(err)
		}
		if err := c.Check(nil); err != nil {
			t.Errorf("Check = %v after SERVING", err)
		}
	})
	t.Run("if nothing listens, WaitReady gives up naming the address and the timeout", func(t *testing.T) {
		t.Parallel()
		c, err := New(Options{Address: "unix:///nonexistent/polyop.sock"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err = c.WaitReady(context.Background(), 300*time.Millisecond, logr.Discard())
		if err == nil || !contains(err.Error(), "unix:///nonexistent/polyop.sock", "did not become ready within 300ms") {
			t.Errorf("WaitReady = %v", err)
		}
	})
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
