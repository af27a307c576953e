package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

var configMaps = schema.GroupResource{Resource: "configmaps"}

func TestToStatusKeepsTheAPIServersMeaning(t *testing.T) {
	t.Parallel()
	gk := schema.GroupKind{Kind: "ConfigMap"}
	for name, tc := range map[string]struct {
		err        error
		wantCode   codes.Code
		wantReason metav1.StatusReason
		check      func(*testing.T, metav1.Status)
	}{
		"if the object is missing, then NOT_FOUND with reason NotFound and its name": {
			err: apierrors.NewNotFound(configMaps, "x"), wantCode: codes.NotFound, wantReason: metav1.StatusReasonNotFound,
			check: func(t *testing.T, s metav1.Status) {
				if s.Code != 404 || s.Details == nil || s.Details.Name != "x" || s.Details.Kind != "configmaps" {
					t.Errorf("status %+v, want code 404 naming configmaps x", s)
				}
			},
		},
		"if it exists already, then ALREADY_EXISTS": {
			err: apierrors.NewAlreadyExists(configMaps, "x"), wantCode: codes.AlreadyExists, wantReason: metav1.StatusReasonAlreadyExists,
		},
		"if the write conflicts, then ABORTED": {
			err: apierrors.NewConflict(configMaps, "x", errors.New("modified")), wantCode: codes.Aborted, wantReason: metav1.StatusReasonConflict,
		},
		"if it is invalid, then INVALID_ARGUMENT with every cause": {
			err: apierrors.NewInvalid(gk, "x", field.ErrorList{
				field.Invalid(field.NewPath("metadata", "name"), "X", "bad name"),
				field.Required(field.NewPath("data"), ""),
			}),
			wantCode: codes.InvalidArgument, wantReason: metav1.StatusReasonInvalid,
			check: func(t *testing.T, s metav1.Status) {
				if s.Code != 422 || s.Details == nil || len(s.Details.Causes) != 2 || s.Details.Causes[0].Field != "metadata.name" {
					t.Errorf("status %+v, want code 422 with two causes, the first on metadata.name", s)
				}
			},
		},
		"if it is forbidden, then PERMISSION_DENIED": {
			err: apierrors.NewForbidden(configMaps, "x", errors.New("no")), wantCode: codes.PermissionDenied, wantReason: metav1.StatusReasonForbidden,
		},
		"if unauthorized, then UNAUTHENTICATED": {
			err: apierrors.NewUnauthorized("who"), wantCode: codes.Unauthenticated, wantReason: metav1.StatusReasonUnauthorized,
		},
		"if the request is bad, then FAILED_PRECONDITION": {
			err: apierrors.NewBadRequest("bad"), wantCode: codes.FailedPrecondition, wantReason: metav1.StatusReasonBadRequest,
		},
		"if the continue token expired, then FAILED_PRECONDITION": {
			err: apierrors.NewResourceExpired("too old"), wantCode: codes.FailedPrecondition, wantReason: metav1.StatusReasonExpired,
		},
		"if throttled, then RESOURCE_EXHAUSTED": {
			err: apierrors.NewTooManyRequests("slow down", 1), wantCode: codes.ResourceExhausted, wantReason: metav1.StatusReasonTooManyRequests,
		},
		"if the API server is unavailable, then UNAVAILABLE": {
			err: apierrors.NewServiceUnavailable("down"), wantCode: codes.Unavailable, wantReason: metav1.StatusReasonServiceUnavailable,
		},
		"if it timed out on the server, then UNAVAILABLE": {
			err: apierrors.NewServerTimeout(configMaps, "get", 1), wantCode: codes.Unavailable, wantReason: metav1.StatusReasonServerTimeout,
		},
		"if the server failed, then INTERNAL": {
			err: apierrors.NewInternalError(errors.New("boom")), wantCode: codes.Internal, wantReason: metav1.StatusReasonInternalError,
		},
		"if the method is not allowed, then UNIMPLEMENTED": {
			err: apierrors.NewMethodNotSupported(configMaps, "watch"), wantCode: codes.Unimplemented, wantReason: metav1.StatusReasonMethodNotAllowed,
		},
		"if the media type is unsupported, then INVALID_ARGUMENT": {
			err: &apierrors.StatusError{ErrStatus: metav1.Status{Code: 415, Reason: metav1.StatusReasonUnsupportedMediaType, Message: "no"}}, wantCode: codes.InvalidArgument, wantReason: metav1.StatusReasonUnsupportedMediaType,
		},
		"if the API server's error is wrapped, it is still found": {
			err: fmt.Errorf("reading: %w", apierrors.NewNotFound(configMaps, "x")), wantCode: codes.NotFound, wantReason: metav1.StatusReasonNotFound,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := status.Convert(toStatus(tc.err))
			if st.Code() != tc.wantCode {
				t.Errorf("code %s, want %s", st.Code(), tc.wantCode)
			}
			var apiErr apierrors.APIStatus
			errors.As(tc.err, &apiErr)
			if st.Message() != apiErr.Status().Message {
				t.Errorf("message %q, want the API server's %q", st.Message(), apiErr.Status().Message)
			}
			s, ok := detail(st)
			if !ok {
				t.Fatalf("no APIError detail")
			}
			if s.Reason != tc.wantReason || s.Kind != "Status" || s.APIVersion != "v1" || s.Status != metav1.StatusFailure {
				t.Errorf("detail %+v, want a v1 Status, Failure, with reason %s", s, tc.wantReason)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func TestToStatusOfErrorsNotFromTheAPIServer(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err  error
		want codes.Code
	}{
		"if the kind is not served, then NOT_FOUND": {
			err: &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "x.io", Kind: "Nope"}, SearchedVersions: []string{"v1"}}, want: codes.NotFound,
		},
		"if the call ran out of time, then DEADLINE_EXCEEDED": {err: fmt.Errorf("get: %w", context.DeadlineExceeded), want: codes.DeadlineExceeded},
		"if the call was cancelled, then CANCELED":            {err: context.Canceled, want: codes.Canceled},
		"if it is already a gRPC status, then it passes":      {err: invalid("bad"), want: codes.InvalidArgument},
		"if it is anything else, then INTERNAL":               {err: errors.New("what"), want: codes.Internal},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := status.Convert(toStatus(tc.err))
			if st.Code() != tc.want {
				t.Errorf("code %s, want %s", st.Code(), tc.want)
			}
			if _, ok := detail(st); ok {
				t.Errorf("an error that is not the API server's carries an APIError detail")
			}
		})
	}
	if toStatus(nil) != nil {
		t.Errorf("toStatus(nil) is not nil")
	}
}

func detail(st *status.Status) (metav1.Status, bool) {
	for _, d := range st.Details() {
		if e, ok := d.(*polyopv1alpha1.APIError); ok {
			var s metav1.Status
			if err := json.Unmarshal(e.GetStatus(), &s); err != nil {
				return s, false
			}
			return s, true
		}
	}
	return metav1.Status{}, false
}
