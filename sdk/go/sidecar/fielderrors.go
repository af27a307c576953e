package sidecar

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// denialOf turns a defaulter's or validator's error into the wire's Denial,
// as controller-runtime's admission webhooks turn it into a response:
//
//   - an API status error (apierrors.NewInvalid, NewConflict, NewBadRequest,
//     …) keeps its message, code and reason and, when it is Invalid, its
//     causes, as field errors;
//   - anything else is its message (a 403 Forbidden).
//
// The host rebuilds from the field errors the very status
// apierrors.NewInvalid builds, so the client sees what an in-process
// controller-runtime webhook would have answered.
func denialOf(err error) *polyopv1alpha1.Denial {
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		st := apiStatus.Status()
		d := &polyopv1alpha1.Denial{Message: st.Message, Code: st.Code, Reason: string(st.Reason)}
		if st.Reason == metav1.StatusReasonInvalid && st.Details != nil {
			for _, c := range st.Details.Causes {
				d.FieldErrors = append(d.FieldErrors, fieldErrorOfCause(c))
			}
		}
		if d.Message == "" {
			d.Message = err.Error()
		}
		return d
	}
	return &polyopv1alpha1.Denial{Message: err.Error()}
}

// fieldErrorOfCause recovers a field error from a cause of an Invalid status,
// whose message is the field error's ErrorBody: "<type>[: <value>][: <detail>]".
// The value is recovered when it renders back exactly; otherwise it stays in
// the detail, which renders the same text.
func fieldErrorOfCause(c metav1.StatusCause) *polyopv1alpha1.FieldError {
	t := field.ErrorType(c.Type)
	out := &polyopv1alpha1.FieldError{Field: c.Field, Type: fieldErrorTypeOf(t)}
	if _, known := fieldErrorTypes[t]; !known {
		// A cause of a type the wire has no name for: keep its whole text.
		out.Type = polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_INVALID
		out.Detail = c.Message
		return out
	}
	rest, ok := strings.CutPrefix(c.Message, t.String())
	if !ok {
		out.Detail = c.Message
		return out
	}
	rest = strings.TrimPrefix(rest, ": ")
	out.Detail = rest
	if !valueShown(t) || rest == "" {
		return out
	}
	value, detail, ok := splitValue(rest)
	if !ok {
		return out
	}
	candidate := &field.Error{Type: t, BadValue: value, Detail: detail}
	if candidate.ErrorBody() == c.Message {
		if data, err := json.Marshal(value); err == nil {
			out.BadValue = data
			out.Detail = detail
		}
	}
	return out
}

// splitValue splits "<value>[: <detail>]" where value is a quoted string or a
// JSON value.
func splitValue(s string) (value any, detail string, ok bool) {
	var n int
	if strings.HasPrefix(s, `"`) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return nil, "", false
		}
		v, err := strconv.Unquote(q)
		if err != nil {
			return nil, "", false
		}
		value, n = v, len(q)
	} else {
		end := strings.Index(s, ": ")
		if end < 0 {
			end = len(s)
		}
		var v any
		if err := json.Unmarshal([]byte(s[:end]), &v); err != nil {
			return nil, "", false
		}
		if f, isFloat := v.(float64); isFloat && f == float64(int64(f)) {
			v = int64(f)
		}
		value, n = v, end
	}
	rest := s[n:]
	if rest == "" {
		return value, "", true
	}
	detail, ok = strings.CutPrefix(rest, ": ")
	return value, detail, ok
}

// valueShown reports whether field.Error's ErrorBody shows the bad value of a
// field error of type t.
func valueShown(t field.ErrorType) bool {
	switch t {
	case field.ErrorTypeRequired, field.ErrorTypeForbidden, field.ErrorTypeTooLong, field.ErrorTypeTooShort, field.ErrorTypeInternal:
		return false
	}
	return true
}

var fieldErrorTypes = map[field.ErrorType]polyopv1alpha1.FieldErrorType{
	field.ErrorTypeInvalid:      polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_INVALID,
	field.ErrorTypeRequired:     polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_REQUIRED,
	field.ErrorTypeNotSupported: polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_NOT_SUPPORTED,
	field.ErrorTypeForbidden:    polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_FORBIDDEN,
	field.ErrorTypeDuplicate:    polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_DUPLICATE,
	field.ErrorTypeTooLong:      polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_LONG,
	field.ErrorTypeTooMany:      polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_MANY,
	field.ErrorTypeNotFound:     polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_NOT_FOUND,
	field.ErrorTypeInternal:     polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_INTERNAL,
	field.ErrorTypeTooShort:     polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_SHORT,
	field.ErrorTypeTooFew:       polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_FEW,
	field.ErrorTypeTypeInvalid:  polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TYPE_INVALID,
}

func fieldErrorTypeOf(t field.ErrorType) polyopv1alpha1.FieldErrorType {
	if pt, ok := fieldErrorTypes[t]; ok {
		return pt
	}
	return polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_INVALID
}
