package admission

import (
	"context"
	"net/http"
	"time"
)

// DefaultTimeout is the longest the host waits for the sidecar's answer to an
// admission call unless configured otherwise (the host's --admission-timeout):
// well under the API server's default webhook timeout of 10 seconds, so that a
// slow sidecar is reported by the host, naming the sidecar, rather than by the
// API server as a webhook that timed out.
const DefaultTimeout = 3 * time.Second

// minMargin is the least time Deadline keeps between the sidecar's deadline
// and the API server's timeout, for the host's own work and the network.
const minMargin = 250 * time.Millisecond

// Deadline is how long the host gives the sidecar for a call the API server
// waits apiServerTimeout for: a fifth of that timeout (at least 250ms) less
// (half of it, for timeouts too short for that), and at most max when max is
// positive. The answer is never below 10ms.
func Deadline(apiServerTimeout, max time.Duration) time.Duration {
	d := apiServerTimeout - maxDuration(apiServerTimeout/5, minMargin)
	if d <= 0 {
		d = apiServerTimeout / 2
	}
	if max > 0 && max < d {
		d = max
	}
	return maxDuration(d, 10*time.Millisecond)
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

type timeoutKey struct{}

// WithAPIServerTimeout records the timeout the API server gives the webhook
// call, which it sends as the request's "timeout" query parameter (for
// example "?timeout=10s"). It fits admission.Webhook's WithContextFunc.
func WithAPIServerTimeout(ctx context.Context, r *http.Request) context.Context {
	if r == nil || r.URL == nil {
		return ctx
	}
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
		return context.WithValue(ctx, timeoutKey{}, d)
	}
	return ctx
}

// APIServerTimeout returns the timeout WithAPIServerTimeout recorded in ctx,
// or fallback when there is none.
func APIServerTimeout(ctx context.Context, fallback time.Duration) time.Duration {
	if d, ok := ctx.Value(timeoutKey{}).(time.Duration); ok {
		return d
	}
	return fallback
}
