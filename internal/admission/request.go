package admission

import (
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// NewRequest is the sidecar's view of an admission request: everything the
// API server's AdmissionReview says about it, the objects as the API server's
// JSON.
func NewRequest(req admission.Request) *polyopv1alpha1.AdmissionRequest {
	out := &polyopv1alpha1.AdmissionRequest{
		Uid:         string(req.UID),
		Kind:        &polyopv1alpha1.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind},
		Resource:    req.Resource.Resource,
		Subresource: req.SubResource,
		Key:         &polyopv1alpha1.ObjectKey{Namespace: req.Namespace, Name: req.Name},
		Operation:   operations[req.Operation],
		UserInfo: &polyopv1alpha1.UserInfo{
			Username: req.UserInfo.Username,
			Uid:      req.UserInfo.UID,
			Groups:   req.UserInfo.Groups,
		},
		Object:    req.Object.Raw,
		OldObject: req.OldObject.Raw,
		DryRun:    req.DryRun != nil && *req.DryRun,
	}
	if len(req.UserInfo.Extra) > 0 {
		out.UserInfo.Extra = make(map[string]*polyopv1alpha1.ExtraValue, len(req.UserInfo.Extra))
		for k, v := range req.UserInfo.Extra {
			out.UserInfo.Extra[k] = &polyopv1alpha1.ExtraValue{Values: v}
		}
	}
	return out
}

var operations = map[admissionv1.Operation]polyopv1alpha1.Operation{
	admissionv1.Create:  polyopv1alpha1.Operation_OPERATION_CREATE,
	admissionv1.Update:  polyopv1alpha1.Operation_OPERATION_UPDATE,
	admissionv1.Delete:  polyopv1alpha1.Operation_OPERATION_DELETE,
	admissionv1.Connect: polyopv1alpha1.Operation_OPERATION_CONNECT,
}
