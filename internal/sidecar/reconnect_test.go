package sidecar

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/testenv"
)

func TestConnectParams(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		maxDelay       time.Duration
		wantMax, wantB time.Duration
	}{
		"if no cap is set, gRPC's own backoff applies": {
			wantMax: 120 * time.Second, wantB: time.Second,
		},
		"if the cap is above gRPC's first delay, only the maximum changes": {
			maxDelay: 5 * time.Second, wantMax: 5 * time.Second, wantB: time.Second,
		},
		"if the cap is below gRPC's first delay, the first delay is the cap": {
			maxDelay: 300 * time.Millisecond, wantMax: 300 * time.Millisecond, wantB: 300 * time.Millisecond,
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := connectParams(tc.maxDelay)
			if p.Backoff.MaxDelay != tc.wantMax || p.Backoff.BaseDelay != tc.wantB {
				t.Errorf("backoff from %s to %s, want from %s to %s", p.Backoff.BaseDelay, p.Backoff.MaxDelay, tc.wantB, tc.wantMax)
			}
			if p.MinConnectTimeout != 20*time.Second {
				t.Errorf("MinConnectTimeout = %s, want gRPC's default 20s", p.MinConnectTimeout)
			}
		})
	}
}

// TestReconnectDelayIsCapped stops a sidecar's server for longer than gRPC's
// backoff takes to grow past the cap, serves again on the same socket, and
// measures how long the client's health check takes to pass again. With
// gRPC's own backoff (1s, growing 1.6 times per failed attempt) the attempts
// come about 16s and 26s after the outage began, so an outage of 20s is
// followed by 3s to 9s more; with the cap, by at most the cap and its jitter.
func TestReconnectDelayIsCapped(t *testing.T) {
	t.Parallel()
	const (
		maxDelay = 200 * time.Millisecond
		outage   = 20 * time.Second
		// What a loaded machine may add to the cap and its 20% jitter. The
		// uncapped backoff's next attempt after the outage comes about 6s
		// later, well past the bound.
		margin = 2 * time.Second
	)
	dir, err := os.MkdirTemp("", "po-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	start := func() *grpc.Server {
		t.Helper()
		srv, _ := fakesidecar.ServeOn(t, sock, nil)
		return srv
	}

	c, err := New(Options{Address: "unix://" + sock, MaxReconnectDelay: maxDelay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	srv := start()
	waitCheck(t, c, 10*time.Second, true)

	srv.Stop()
	waitCheck(t, c, 10*time.Second, false)
	// The outage itself. Calls keep coming meanwhile, as the host's
	// readiness probes and retries do, so that gRPC keeps trying to
	// reconnect (an idle connection waits for the next call instead).
	testenv.Consistently(t, outage, "the health check of a stopped sidecar fails", checkPasses(c, false))
	srv = start()
	t.Cleanup(srv.Stop)
	back := time.Now()
	waitCheck(t, c, time.Minute, true)
	took := time.Since(back)
	t.Logf("the health check passed %s after the sidecar served again", took.Round(time.Millisecond))
	if bound := maxDelay*6/5 + margin; took > bound {
		t.Errorf("the health check passed %s after the sidecar served again, want at most %s (the %s cap, its jitter and a margin)",
			took.Round(time.Millisecond), bound, maxDelay)
	}
}

// waitCheck polls c's health check until it passes (or fails, with pass
// false).
func waitCheck(t *testing.T, c *Client, timeout time.Duration, pass bool) {
	t.Helper()
	testenv.Eventually(t, timeout, map[bool]string{true: "the health check passes", false: "the health check fails"}[pass], checkPasses(c, pass))
}

// checkPasses is a condition: c's health check passes (or fails, with pass
// false).
func checkPasses(c *Client, pass bool) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		switch err := c.check(ctx); {
		case (err == nil) == pass:
			return nil
		case err == nil:
			return errors.New("it passes")
		default:
			return err
		}
	}
}
