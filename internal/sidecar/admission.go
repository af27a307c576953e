package sidecar

import (
	"context"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// The admission and conversion calls carry no deadline of their own: each
// webhook's deadline depends on the timeout the API server gives it, so the
// caller (internal/admission, internal/conversion) sets it on ctx.

// Default sends one DefaultRequest (a mutating admission call) with ctx's
// deadline.
func (c *Client) Default(ctx context.Context, req *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
	return c.svc.Default(ctx, req)
}

// Validate sends one ValidateRequest (a validating admission call) with ctx's
// deadline.
func (c *Client) Validate(ctx context.Context, req *polyopv1alpha1.ValidateRequest) (*polyopv1alpha1.ValidateResponse, error) {
	return c.svc.Validate(ctx, req)
}

// Convert sends one ConvertRequest (a CRD conversion call) with ctx's
// deadline.
func (c *Client) Convert(ctx context.Context, req *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
	return c.svc.Convert(ctx, req)
}
