package render

import (
	"context"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/polyop/polyop/internal/admission"
	"github.com/polyop/polyop/internal/description"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// renderUser is the user an admission request of polyop render comes from.
const renderUser = "polyop-render"

var renderOperations = map[string]admissionv1.Operation{
	"create": admissionv1.Create,
	"update": admissionv1.Update,
	"delete": admissionv1.Delete,
}

// admit sends obj through the sidecar's webhooks for its kind, through the
// host's own admission handlers, as the API server would for the operation
// of --admission: Default, then Validate on the defaulted object. obj is
// updated to the defaulted object. It reports whether the object was
// admitted.
func (r *renderer) admit(ctx context.Context, obj *unstructured.Unstructured, old *fileObject) (*AdmissionResult, bool, error) {
	gvk := obj.GroupVersionKind()
	var wh *description.Webhook
	var kinds []string
	for i, w := range r.desc.Webhooks {
		kinds = append(kinds, description.GVKString(w.GVK))
		if w.GVK == gvk {
			wh = &r.desc.Webhooks[i]
		}
	}
	if wh == nil {
		return nil, false, fmt.Errorf("sidecar %q has no webhook for %s, so --admission has nothing to call: it has webhooks for %s",
			r.desc.Name, description.GVKString(gvk), listOrNone(kinds))
	}
	op := renderOperations[r.opts.Admission]
	result := &AdmissionResult{Operation: string(op)}
	if !admits(*wh, op) {
		result.Skipped = fmt.Sprintf("the sidecar's webhook for %s does not admit %s: the API server would not call it", gvk.Kind, op)
		return result, true, nil
	}
	resource := wh.Resource
	if resource == "" {
		if m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			resource = m.Resource.Resource
		}
	}
	req := func(object *unstructured.Unstructured) (ctrladmission.Request, error) {
		ar := admissionv1.AdmissionRequest{
			UID:       types.UID("polyop-render-" + r.opts.Admission),
			Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
			Name:      obj.GetName(),
			Namespace: obj.GetNamespace(),
			Operation: op,
			UserInfo:  authenticationv1.UserInfo{Username: renderUser},
			DryRun:    ptr.To(false),
		}
		if op == admissionv1.Delete {
			// The API server sends the object being deleted as the old one.
			raw, err := object.MarshalJSON()
			if err != nil {
				return ctrladmission.Request{}, err
			}
			ar.OldObject = runtime.RawExtension{Raw: raw}
		} else {
			raw, err := object.MarshalJSON()
			if err != nil {
				return ctrladmission.Request{}, err
			}
			ar.Object = runtime.RawExtension{Raw: raw}
			if old != nil {
				if ar.OldObject.Raw, err = old.MarshalJSON(); err != nil {
					return ctrladmission.Request{}, err
				}
			}
		}
		return ctrladmission.Request{AdmissionRequest: ar}, nil
	}
	opts := admission.Options{SidecarName: r.desc.Name, SidecarAddress: r.sc.Address(), Timeout: r.opts.Timeout}

	if wh.Default && op != admissionv1.Delete {
		areq, err := req(obj)
		if err != nil {
			return nil, false, err
		}
		resp := admission.NewDefaulting(r.sc, *wh, opts).Handle(ctx, areq)
		call := newAdmissionCall(resp)
		result.Default = call
		if !resp.Allowed {
			return result, false, nil
		}
		if len(resp.Patch) > 0 {
			patch, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				return nil, false, fmt.Errorf("decoding the patch of the Default answer: %w", err)
			}
			defaulted, err := patch.Apply(areq.Object.Raw)
			if err != nil {
				return nil, false, fmt.Errorf("applying the patch of the Default answer: %w", err)
			}
			if err := obj.UnmarshalJSON(defaulted); err != nil {
				return nil, false, fmt.Errorf("decoding the defaulted object: %w", err)
			}
			result.Defaulted = obj.DeepCopy().Object
		}
	}
	if wh.Validate {
		areq, err := req(obj)
		if err != nil {
			return nil, false, err
		}
		resp := admission.NewValidating(r.sc, *wh, opts).Handle(ctx, areq)
		result.Validate = newAdmissionCall(resp)
		if !resp.Allowed {
			return result, false, nil
		}
	}
	return result, true, nil
}

// admits reports whether wh admits op.
func admits(wh description.Webhook, op admissionv1.Operation) bool {
	want := map[admissionv1.Operation]polyopv1alpha1.Operation{
		admissionv1.Create: polyopv1alpha1.Operation_OPERATION_CREATE,
		admissionv1.Update: polyopv1alpha1.Operation_OPERATION_UPDATE,
		admissionv1.Delete: polyopv1alpha1.Operation_OPERATION_DELETE,
	}[op]
	for _, o := range wh.Operations {
		if o == want {
			return true
		}
	}
	return false
}
