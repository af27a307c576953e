package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Denied is the response to a sidecar's Denial of a request about the object
// named name of kind gk.
//
// With field errors it is a 422 Invalid status with one cause per field error,
// and the message apierrors.NewInvalid builds from them, as controller-runtime
// answers for a validator returning such an error and as the API server's own
// validation reads; the Denial's message is not shown (the handlers log it).
// Without field errors it is a 403
// Forbidden with the Denial's message, as admission.Denied. The Denial's code
// and reason, when set, replace the status's, as controller-runtime answers a
// webhook returning any API status error with that status. A code outside 400
// to 599 is an error: the answer is broken.
func Denied(gk schema.GroupKind, name string, d *polyopv1alpha1.Denial) (admission.Response, error) {
	code := d.GetCode()
	if code != 0 && (code < 400 || code > 599) {
		return admission.Response{}, fmt.Errorf("has code %d, which is no HTTP error code (want 400 to 599, or 0 for the default)", code)
	}
	var status metav1.Status
	if len(d.GetFieldErrors()) == 0 {
		msg := d.GetMessage()
		if msg == "" {
			msg = "denied without a message"
		}
		status = *admission.Denied(msg).Result
	} else {
		status = apierrors.NewInvalid(gk, name, FieldErrors(d.GetFieldErrors())).Status()
	}
	if code != 0 {
		status.Code, status.Reason = code, reasonForCode(code)
	}
	if d.GetReason() != "" {
		status.Reason = metav1.StatusReason(d.GetReason())
	}
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}, nil
}

// reasonForCode is the reason Kubernetes gives an HTTP status code: the one
// client-go reports for a response with that code and no status of its own
// (StatusReasonUnknown, empty, for a code it has none for).
func reasonForCode(code int32) metav1.StatusReason {
	return apierrors.NewGenericServerResponse(int(code), "", schema.GroupResource{}, "", "", 0, false).Status().Reason
}

// FieldErrors turns the wire's field errors into apimachinery's, so that each
// renders (Error, ErrorBody) exactly as the one the sidecar reported.
func FieldErrors(in []*polyopv1alpha1.FieldError) field.ErrorList {
	out := make(field.ErrorList, 0, len(in))
	for _, fe := range in {
		out = append(out, &field.Error{
			Type:     fieldErrorType(fe.GetType()),
			Field:    fe.GetField(),
			BadValue: badValue(fe.GetBadValue()),
			Detail:   fe.GetDetail(),
		})
	}
	return out
}

var fieldErrorTypes = map[polyopv1alpha1.FieldErrorType]field.ErrorType{
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_UNSPECIFIED:   field.ErrorTypeInvalid,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_INVALID:       field.ErrorTypeInvalid,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_REQUIRED:      field.ErrorTypeRequired,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_NOT_SUPPORTED: field.ErrorTypeNotSupported,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_FORBIDDEN:     field.ErrorTypeForbidden,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_DUPLICATE:     field.ErrorTypeDuplicate,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_LONG:      field.ErrorTypeTooLong,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_MANY:      field.ErrorTypeTooMany,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_NOT_FOUND:     field.ErrorTypeNotFound,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_INTERNAL:      field.ErrorTypeInternal,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_SHORT:     field.ErrorTypeTooShort,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_FEW:       field.ErrorTypeTooFew,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TYPE_INVALID:  field.ErrorTypeTypeInvalid,
}

func fieldErrorType(t polyopv1alpha1.FieldErrorType) field.ErrorType {
	if ft, ok := fieldErrorTypes[t]; ok {
		return ft
	}
	return field.ErrorTypeInvalid
}

// badValue decodes a field error's bad value, JSON on the wire, into the Go
// value field.Error renders the way the sidecar's own value rendered: strings
// quoted, integers and other numbers, booleans plainly, anything else as its
// JSON. Empty means the value is not worth quoting (field.OmitValueType).
func badValue(raw []byte) any {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return field.OmitValueType{}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	switch t := v.(type) {
	case string, bool:
		return t
	case json.Number:
		if i, err := strconv.ParseInt(t.String(), 10, 64); err == nil {
			return i
		}
		if f, err := t.Float64(); err == nil {
			return f
		}
		return t.String()
	default:
		return json.RawMessage(raw)
	}
}

// failed is the response for a request the host could not get a usable answer
// for: a denial with code (503 when the sidecar is unreachable, 500 when its
// answer is unusable).
func failed(code int32, msg string) admission.Response {
	reason := metav1.StatusReasonInternalError
	if code == http.StatusServiceUnavailable {
		reason = metav1.StatusReasonServiceUnavailable
	}
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result:  &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg},
	}}
}
