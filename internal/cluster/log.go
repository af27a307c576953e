package cluster

import (
	"context"
	"encoding/json"
	"path"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// logCall logs every request at V(1): the method, the kind, the object (or
// the namespace of a List), where a read came from, the outcome and how long
// it took, and in a traced call the reconcileID, trace_id and span_id.
func (s *Server) logCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	log := s.opts.Log.V(1)
	if !log.Enabled() {
		return handler(ctx, req)
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	kv := []any{"method", path.Base(info.FullMethod)}
	kv = append(kv, describeRequest(req)...)
	if r, ok := resp.(interface {
		GetSource() polyopv1alpha1.ReadSource
	}); ok && err == nil {
		kv = append(kv, "source", sourceName(r.GetSource()))
	}
	kv = append(kv, "code", status.Code(err).String(), "duration", time.Since(start).String())
	if err != nil {
		kv = append(kv, "error", status.Convert(err).Message())
	}
	// Inside a traced sidecar call: the reconcile's ID and this call's span.
	if id := tracing.ReconcileIDFromContext(ctx); id != "" {
		kv = append(kv, "reconcileID", id)
	}
	kv = append(kv, tracing.LogValues(ctx)...)
	log.Info("cluster request", kv...)
	return resp, err
}

// describeRequest names what a request is about, for the log.
func describeRequest(req any) []any {
	var kv []any
	if r, ok := req.(interface {
		GetKind() *polyopv1alpha1.GroupVersionKind
	}); ok {
		kv = append(kv, "kind", kindName(r.GetKind()))
	}
	if r, ok := req.(interface {
		GetKey() *polyopv1alpha1.ObjectKey
	}); ok {
		kv = append(kv, "object", keyName(r.GetKey().GetNamespace(), r.GetKey().GetName()))
	}
	switch r := req.(type) {
	case *polyopv1alpha1.GetRequest:
		if r.GetSubresource() != "" {
			kv = append(kv, "subresource", r.GetSubresource())
		}
	case *polyopv1alpha1.ListRequest:
		kv = append(kv, "namespace", r.GetNamespace())
		if r.GetLabelSelector() != "" {
			kv = append(kv, "labelSelector", r.GetLabelSelector())
		}
		if r.GetFieldSelector() != "" {
			kv = append(kv, "fieldSelector", r.GetFieldSelector())
		}
	case *polyopv1alpha1.CreateRequest:
		if r.GetSubresource() != "" {
			kv = append(kv, "subresource", r.GetSubresource())
			break
		}
		if r.GetKey().GetName() == "" {
			kv = append(kv, "generateName", generateName(r.GetObject()))
		}
	case *polyopv1alpha1.UpdateRequest:
		if r.GetSubresource() != "" {
			kv = append(kv, "subresource", r.GetSubresource())
		}
	case *polyopv1alpha1.PatchRequest:
		kv = append(kv, "patchType", r.GetType().String())
		if r.GetSubresource() != "" {
			kv = append(kv, "subresource", r.GetSubresource())
		}
	}
	return kv
}

// generateName reads the metadata.generateName of an object sent as JSON,
// for the log of a create whose key has no name.
func generateName(raw []byte) string {
	var o struct {
		Metadata struct {
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &o)
	return o.Metadata.GenerateName
}

func kindName(k *polyopv1alpha1.GroupVersionKind) string {
	if k.GetGroup() == "" {
		return k.GetKind() + "." + k.GetVersion()
	}
	return k.GetKind() + "." + k.GetGroup() + "/" + k.GetVersion()
}

func keyName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func sourceName(s polyopv1alpha1.ReadSource) string {
	switch s {
	case polyopv1alpha1.ReadSource_READ_SOURCE_CACHE:
		return "cache"
	case polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER:
		return "api-server"
	}
	return s.String()
}
