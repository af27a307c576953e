package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// APIStatus returns the API server's error carried by a Cluster service
// error, as an *apierrors.StatusError, and false when err carries none. The
// Client already returns such errors this way; APIStatus is for code that
// calls the Cluster service through the generated client.
func APIStatus(err error) (*apierrors.StatusError, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return nil, false
	}
	for _, d := range st.Details() {
		detail, ok := d.(*polyopv1alpha1.APIError)
		if !ok {
			continue
		}
		var s metav1.Status
		if err := json.Unmarshal(detail.GetStatus(), &s); err != nil {
			continue
		}
		if s.Status == "" {
			s.Status = metav1.StatusFailure
		}
		if s.Message == "" {
			s.Message = st.Message()
		}
		return &apierrors.StatusError{ErrStatus: s}, true
	}
	return nil, false
}

// wrapError returns the API server's error as it is, so that apierrors'
// predicates and type assertions work as with controller-runtime's client, and
// wraps every other error with what was being done. A NOT_FOUND without the
// API server's status is the host saying that the API server does not serve
// the kind gvk: the error then wraps a *meta.NoKindMatchError, as
// controller-runtime's client returns (meta.IsNoMatchError). When ctx has
// ended, the error also wraps ctx.Err(), so errors.Is(err,
// context.DeadlineExceeded) holds as it does with controller-runtime's client.
func wrapError(ctx context.Context, gvk schema.GroupVersionKind, what string, err error) error {
	if apiErr, ok := APIStatus(err); ok {
		return apiErr
	}
	if status.Code(err) == codes.NotFound && gvk.Kind != "" {
		noMatch := &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
		return fmt.Errorf("polyop client: %s: %w (%w)", what, noMatch, err)
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("polyop client: %s: %w: %w", what, ctxErr, err)
	}
	return fmt.Errorf("polyop client: %s: %w", what, err)
}
