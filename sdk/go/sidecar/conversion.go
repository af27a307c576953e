package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Hub marks the version of a kind that every other version converts to and
// from: controller-runtime's conversion.Hub. The storage version is the usual
// hub.
type Hub = conversion.Hub

// Convertible is a version of a kind that converts to and from the hub:
// controller-runtime's conversion.Convertible. A kind whose versions are all
// registered in the Server's scheme, one a Hub and every other Convertible,
// converts with no more than NewWebhookManagedBy for any of its versions, as
// in a kubebuilder project.
type Convertible = conversion.Convertible

// Convert answers the host's conversion call: it decodes each object into the
// Go type of its version, converts it to the desired version (through the
// hub, or the registered converter) and encodes it.
//
// A conversion that fails is answered in the response's error, which the API
// server reports to its client; a request for a kind without a conversion
// too. A panic is answered with gRPC status INTERNAL.
func (s *service) Convert(ctx context.Context, in *polyopv1alpha1.ConvertRequest) (resp *polyopv1alpha1.ConvertResponse, err error) {
	ctx = withCallLogger(ctx, s.log.WithValues("webhook", "convert", "desiredAPIVersion", in.GetDesiredApiVersion(), "objects", len(in.GetObjects())))
	log := logf.FromContext(ctx)
	defer func() {
		if r := recover(); r != nil {
			log.Error(fmt.Errorf("%v", r), "Observed a panic in a conversion", "stack", string(debug.Stack()))
			resp, err = nil, status.Errorf(codes.Internal, "panic: %v [recovered]", r)
		}
	}()
	desired, err := schema.ParseGroupVersion(in.GetDesiredApiVersion())
	if err != nil {
		return &polyopv1alpha1.ConvertResponse{Error: fmt.Sprintf("desired apiVersion %q: %v", in.GetDesiredApiVersion(), err)}, nil
	}
	out := &polyopv1alpha1.ConvertResponse{Objects: make([][]byte, 0, len(in.GetObjects()))}
	for i, raw := range in.GetObjects() {
		converted, err := s.convertOne(ctx, raw, desired)
		if err != nil {
			log.Info("Conversion failed", "object", i, "reason", err.Error())
			return &polyopv1alpha1.ConvertResponse{Error: err.Error()}, nil
		}
		out.Objects = append(out.Objects, converted)
	}
	return out, nil
}

func (s *Server) convertOne(ctx context.Context, raw []byte, desired schema.GroupVersion) ([]byte, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("an object is not a JSON object: %w", err)
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("apiVersion %q: %w", tm.APIVersion, err)
	}
	srcGVK := gv.WithKind(tm.Kind)
	ref := tm.Kind + " " + tm.Metadata.Name
	if tm.Metadata.Namespace != "" {
		ref = tm.Kind + " " + tm.Metadata.Namespace + "/" + tm.Metadata.Name
	}
	s.mu.RLock()
	reg, ok := s.admission.conversions[srcGVK.GroupKind()]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("sidecar %q does not convert %s", s.opts.Name, srcGVK.GroupKind())
	}
	dstGVK := desired.WithKind(tm.Kind)
	if srcGVK == dstGVK {
		return raw, nil
	}
	scheme := s.Scheme()
	src, err := scheme.New(srcGVK)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if err := decodeJSON(raw, src); err != nil {
		return nil, fmt.Errorf("decoding %s as %s: %w", ref, srcGVK.GroupVersion(), err)
	}
	src.GetObjectKind().SetGroupVersionKind(srcGVK)
	dst, err := scheme.New(dstGVK)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	dst.GetObjectKind().SetGroupVersionKind(dstGVK)
	if err := reg.convert(ctx, scheme, src, dst); err != nil {
		return nil, fmt.Errorf("converting %s from %s to %s: %w", ref, srcGVK.Version, dstGVK.Version, err)
	}
	// Conversions are free to leave the type meta alone.
	dst.GetObjectKind().SetGroupVersionKind(dstGVK)
	return json.Marshal(dst)
}

// convert converts src into dst, both of the registration's kind.
func (c *conversionRegistration) convert(ctx context.Context, scheme *runtime.Scheme, src, dst runtime.Object) error {
	if c.converter != nil {
		return c.converter.ConvertObject(ctx, src, dst)
	}
	srcHub, srcIsHub := src.(Hub)
	dstHub, dstIsHub := dst.(Hub)
	srcConv, srcIsConvertible := src.(Convertible)
	dstConv, dstIsConvertible := dst.(Convertible)
	switch {
	case srcIsHub && dstIsConvertible:
		return dstConv.ConvertFrom(srcHub)
	case dstIsHub && srcIsConvertible:
		return srcConv.ConvertTo(dstHub)
	case srcIsConvertible && dstIsConvertible:
		hub, err := c.hub(scheme)
		if err != nil {
			return err
		}
		if err := srcConv.ConvertTo(hub); err != nil {
			return fmt.Errorf("to the hub: %w", err)
		}
		if err := dstConv.ConvertFrom(hub); err != nil {
			return fmt.Errorf("from the hub: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("%T does not convert to %T: neither is a hub the other converts to", src, dst)
	}
}

// hub returns a fresh instance of the kind's hub version.
func (c *conversionRegistration) hub(scheme *runtime.Scheme) (Hub, error) {
	for _, v := range c.versions {
		obj, err := scheme.New(c.gk.WithVersion(v))
		if err != nil {
			continue
		}
		if hub, ok := obj.(Hub); ok {
			return hub, nil
		}
	}
	return nil, errors.New("no version of " + c.gk.String() + " is a hub")
}
