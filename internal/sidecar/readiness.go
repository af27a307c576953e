package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Readiness does not follow every blip of the sidecar. A sidecar in a crash
// loop, restarted within a second or two each time, would otherwise take
// the pod out of its Services and put it back at every crash, and a webhook
// call that lands in the gap would find no endpoint rather than a host whose
// call is retried a moment later. So:
//   - the host is not ready until the sidecar first answers SERVING (at
//     start, WaitReady waits for it);
//   - it is not ready again only once the sidecar has failed every health
//     check for unreadyAfter, and at least unreadyChecks checks in a row
//     (so that a single failed probe never counts, however far apart the
//     probes are);
//   - it is ready again at the first check answered SERVING.
//
// The calls do not wait for readiness: each object's call that found the
// sidecar gone is retried as soon as the sidecar answers again.
const (
	unreadyAfter  = 5 * time.Second
	unreadyChecks = 2
)

// readiness is the state of the sidecar as the readiness check reports it.
type readiness struct {
	mu sync.Mutex
	// served: some check was answered SERVING.
	served bool
	// failing is how many checks in a row failed, since failingSince.
	failing      int
	failingSince time.Time
}

// observe records a check's result and returns readiness's answer: err, or
// nil while the sidecar has failed for too short a time to count.
func (r *readiness) observe(now time.Time, err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.served, r.failing = true, 0
		return nil
	}
	if r.failing == 0 {
		r.failingSince = now
	}
	r.failing++
	if !r.served || r.failing >= unreadyChecks && now.Sub(r.failingSince) >= unreadyAfter {
		return err
	}
	return nil
}

// Check is the host's readiness check: it has the signature of
// controller-runtime's healthz.Checker. It asks the sidecar's health
// service whether it is serving, within Options.CheckTimeout, and fails
// once the sidecar has been failing for a while (see unreadyAfter): a
// sidecar restarted within seconds does not make the host unready.
func (c *Client) Check(_ *http.Request) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.CheckTimeout)
	defer cancel()
	err := c.check(ctx)
	if c.ready.observe(time.Now(), err) == nil {
		return nil
	}
	return fmt.Errorf("%w (failing for %s)", err, c.ready.failingFor(time.Now()).Round(time.Second))
}

// failingFor is how long the checks have failed in a row.
func (r *readiness) failingFor(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing == 0 {
		return 0
	}
	return now.Sub(r.failingSince)
}

// Serving asks the sidecar's health service once whether it is serving,
// within ctx: nil when it answers SERVING. Unlike Check, it reports each
// failure as it is. When there is no connection, the next attempt to
// connect is made at once rather than after gRPC's backoff: whoever asks
// whether the sidecar is back (objects wait for it) asks again soon, and a
// sidecar restarted in half a second is then found back within that.
func (c *Client) Serving(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.CheckTimeout)
	defer cancel()
	err := c.check(ctx)
	if err == nil {
		_ = c.ready.observe(time.Now(), nil)
	} else if status.Code(errors.Unwrap(err)) == codes.Unavailable {
		c.conn.ResetConnectBackoff()
	}
	return err
}
