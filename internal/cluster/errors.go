package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Code is the gRPC code of an error the API server answered with the HTTP
// status s.Code, as the ClusterService contract lays down: a client that
// reads only the code still tells the common cases apart, and the APIError
// detail carries the rest.
func Code(s metav1.Status) codes.Code {
	switch c := s.Code; {
	case c == http.StatusBadRequest:
		return codes.FailedPrecondition
	case c == http.StatusUnauthorized:
		return codes.Unauthenticated
	case c == http.StatusForbidden:
		return codes.PermissionDenied
	case c == http.StatusNotFound:
		return codes.NotFound
	case c == http.StatusMethodNotAllowed:
		return codes.Unimplemented
	case c == http.StatusConflict:
		if s.Reason == metav1.StatusReasonAlreadyExists {
			return codes.AlreadyExists
		}
		return codes.Aborted
	case c == http.StatusGone:
		// An expired continue token or resource version: start over.
		return codes.FailedPrecondition
	case c == http.StatusNotAcceptable, c == http.StatusUnsupportedMediaType, c == http.StatusUnprocessableEntity:
		return codes.InvalidArgument
	case c == http.StatusRequestEntityTooLarge, c == http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case c == http.StatusInternalServerError:
		if s.Reason == metav1.StatusReasonServerTimeout {
			return codes.Unavailable
		}
		return codes.Internal
	case c == http.StatusBadGateway, c == http.StatusServiceUnavailable, c == http.StatusGatewayTimeout:
		return codes.Unavailable
	case c > 500:
		return codes.Internal
	}
	return codes.Unknown
}

// toStatus turns an error from a read or a write into the gRPC status the
// sidecar receives. Errors that are already gRPC statuses pass unchanged.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		return apiError(apiStatus.Status())
	}
	switch {
	case meta.IsNoMatchError(err):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return status.Error(codes.Unavailable, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// apiError is the gRPC status of an API server error: its code, its message
// and the whole metav1.Status as the APIError detail.
func apiError(s metav1.Status) error {
	if s.Kind == "" {
		s.Kind, s.APIVersion = "Status", "v1"
	}
	if s.Status == "" {
		s.Status = metav1.StatusFailure
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return status.Error(codes.Internal, fmt.Sprintf("encoding the API server's status %q: %v", s.Message, err))
	}
	st, err := status.New(Code(s), s.Message).WithDetails(&polyopv1alpha1.APIError{Status: raw})
	if err != nil {
		return status.Error(Code(s), s.Message)
	}
	return st.Err()
}

// invalid is the error of a malformed request: it never reached the API
// server, so it carries no APIError detail.
func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// failedPrecondition is the error of a request the host cannot serve as
// things stand, with a message that says what would change that.
func failedPrecondition(format string, args ...any) error {
	return status.Errorf(codes.FailedPrecondition, format, args...)
}
