package sidecar

import polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"

// Service returns srv's gRPC service, for the tests that call it as the host
// does where sidecartest has no say: a call's own deadline, the Cluster
// service's address or the protocol version the host announces.
func Service(srv *Server) polyopv1alpha1.SidecarServiceServer { return &service{Server: srv} }
