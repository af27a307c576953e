// Package sidecarservice hands the gRPC service of a sidecar.Server, which
// package sidecar keeps unexported, to the SDK's other packages: sidecartest
// calls it as the host does, without a socket.
package sidecarservice

import polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"

// Of returns the SidecarService of srv, a *sidecar.Server. Package sidecar
// sets it when it is initialised, so it is set wherever a *sidecar.Server
// exists.
var Of func(srv any) polyopv1alpha1.SidecarServiceServer
