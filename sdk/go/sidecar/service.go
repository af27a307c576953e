package sidecar

import (
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/internal/sidecarservice"
)

// service is the gRPC service of a Server, polyop.v1alpha1.SidecarService:
// the calls the host makes (Describe, Reconcile, Finalize, ReconcileStream,
// Default, Validate, Convert). ServeListener registers it. It is not part of
// the Server's API, so that a Server offers its users only what they call;
// package sidecartest reaches it through sidecarservice.Of to call it as the
// host does.
type service struct {
	polyopv1alpha1.UnimplementedSidecarServiceServer
	*Server
}

var _ polyopv1alpha1.SidecarServiceServer = (*service)(nil)

func init() {
	sidecarservice.Of = func(srv any) polyopv1alpha1.SidecarServiceServer {
		return &service{Server: srv.(*Server)}
	}
}
