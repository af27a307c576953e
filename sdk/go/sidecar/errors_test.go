package sidecar_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/polyop/polyop/sdk/go/sidecar"
)

func TestTemporaryErrorWorksWithIsAndAs(t *testing.T) {
	t.Parallel()
	cause := errors.New("busy")
	err := fmt.Errorf("calling the backend: %w", sidecar.TemporaryError(cause, 30*time.Second))

	if !errors.Is(err, sidecar.TemporaryError(nil, 0)) {
		t.Error("errors.Is does not find the wrapped TemporaryError")
	}
	if !errors.Is(err, cause) {
		t.Error("errors.Is does not find the TemporaryError's cause")
	}
	if errors.Is(cause, sidecar.TemporaryError(nil, 0)) || errors.Is(sidecar.TerminalError(cause), sidecar.TemporaryError(nil, 0)) {
		t.Error("errors.Is finds a TemporaryError where there is none")
	}
	var temporary interface{ RetryAfter() time.Duration }
	if !errors.As(err, &temporary) || temporary.RetryAfter() != 30*time.Second {
		t.Errorf("errors.As = %v, want a RetryAfter of 30s", temporary)
	}
	if err.Error() != "calling the backend: busy" {
		t.Errorf("message = %q", err.Error())
	}
}
