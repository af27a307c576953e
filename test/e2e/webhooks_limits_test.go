package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The webhook server's bounds in TestWebhookServerBounds: small, so that the
// host's memory with them is easy to tell from its memory without them.
const (
	limitsConversionMaxBytes = 8 << 20
	limitsMaxBytesInFlight   = 32 << 20
	limitsReadHeaderTimeout  = 2 * time.Second
	limitsReadTimeout        = 3 * time.Second

	oversizedBody = 60 << 20

	// conversionMemoryFactor is what a conversion in flight holds, in bytes
	// per byte of its body: the objects decoded from the review, the
	// sidecar's answer as gRPC received it, and the converted objects decoded
	// from it.
	conversionMemoryFactor = 3
)

// TestWebhookServerBounds runs the host with the example's webhooks and
// conversion, and sends its webhook server, over TLS, what a client that is
// not the API server may send: concurrent bodies far over the limits, with
// their length declared and without, bodies of another content type, and
// connections that send their headers or their body a byte at a time. The
// host's peak memory stays within twice the budget of bytes in flight above
// its idle memory (and, while it converts lists within the limits, within
// twice what the conversions in flight hold), and every slow connection is
// closed within the read timeouts.
func TestWebhookServerBounds(t *testing.T) {
	f := newFixture(t)
	f.start("sidecar", exampleSidecarBin, "--address", f.address())
	addr := freePort(t)
	host := f.startHostWithWebhooks([]string{
		"--webhook-host", "127.0.0.1",
		"--webhook-port", strings.TrimPrefix(addr, "127.0.0.1:"),
		"--webhook-cert-dir", t.TempDir(),
		"--conversion-max-request-bytes", strconv.Itoa(limitsConversionMaxBytes),
		"--webhook-max-bytes-in-flight", strconv.Itoa(limitsMaxBytesInFlight),
		"--webhook-read-header-timeout", limitsReadHeaderTimeout.String(),
		"--webhook-read-timeout", limitsReadTimeout.String(),
	})
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // The test's own host, with a certificate it made.
	}}
	t.Cleanup(client.CloseIdleConnections)
	base := "https://" + addr

	t.Run("another content type is a 415", func(t *testing.T) {
		resp, err := client.Post(base+"/convert", "application/yaml", strings.NewReader("apiVersion: v1"))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("the webhook server answered %s %q, want 415", resp.Status, msg)
		}
	})

	t.Run("an AdmissionReview without a request is a 400", func(t *testing.T) {
		resp, err := client.Post(base+"/validate-examples-polyop-dev-v1-maintenancewindow", "application/json",
			strings.NewReader(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if !strings.Contains(string(body), `"code":400`) || !strings.Contains(string(body), "the AdmissionReview has no request") {
			t.Errorf("the webhook server answered %s %s, want a 400 saying the review has no request", resp.Status, body)
		}
	})

	t.Run("concurrent oversized bodies keep the host's memory within the budget", func(t *testing.T) {
		idle := procStatusKiB(t, host, "VmRSS")
		// Forget the peak so far (startup), so that VmHWM is the peak from here.
		resetPeak := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", host.Pid()), []byte("5"), 0)
		type result struct {
			what string
			code int
			err  error
		}
		var wg sync.WaitGroup
		results := make(chan result, 18)
		send := func(what, path string, declared bool) {
			defer wg.Done()
			// A reader of a type http.NewRequest does not know: the body
			// is sent chunked unless its length is set.
			req, err := http.NewRequest(http.MethodPost, base+path, &spaces{n: oversizedBody})
			if err != nil {
				results <- result{what: what, err: err}
				return
			}
			if declared {
				req.ContentLength = oversizedBody
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				// The server may close the connection before the client has
				// sent the whole body: it read what it needed.
				results <- result{what: what, err: err}
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			results <- result{what: what, code: resp.StatusCode}
		}
		for range 6 {
			wg.Add(3)
			go send("a declared 60 MiB body to /convert", "/convert", true)
			go send("a chunked 60 MiB body to /convert", "/convert", false)
			go send("a declared 60 MiB body to a validating webhook", "/validate-examples-polyop-dev-v1-maintenancewindow", true)
		}
		wg.Wait()
		close(results)
		for r := range results {
			switch {
			case r.err != nil:
				t.Logf("%s: %v", r.what, r.err)
			case r.code == http.StatusRequestEntityTooLarge, r.code == http.StatusTooManyRequests:
				t.Logf("%s: %d", r.what, r.code)
			default:
				t.Errorf("%s was answered %d, want 413 or 429", r.what, r.code)
			}
		}
		peak := procStatusKiB(t, host, "VmHWM")
		if resetPeak != nil {
			t.Logf("could not reset the peak RSS (%v): VmHWM includes the host's start", resetPeak)
		}
		growth := (peak - idle) * 1024
		t.Logf("host RSS: idle %d MiB, peak %d MiB (+%d MiB) with a budget of %d MiB in flight and a conversion limit of %d MiB",
			idle/1024, peak/1024, growth>>20, limitsMaxBytesInFlight>>20, limitsConversionMaxBytes>>20)
		if growth > 2*limitsMaxBytesInFlight {
			t.Errorf("the host's peak RSS grew by %d MiB over its idle RSS, more than twice the budget of %d MiB in flight",
				growth>>20, limitsMaxBytesInFlight>>20)
		}
	})

	t.Run("concurrent conversions within the limits keep the host's memory within the budget", func(t *testing.T) {
		// A list page of MaintenanceWindows at v1beta1 to convert to v1, just
		// under the conversion limit.
		review := conversionReviewOfSize(f.ns, limitsConversionMaxBytes-(64<<10))
		idle := procStatusKiB(t, host, "VmRSS")
		resetPeak := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", host.Pid()), []byte("5"), 0)
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[int]int{}
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 {
					resp, err := client.Post(base+"/convert", "application/json", bytes.NewReader(review))
					if err != nil {
						t.Errorf("converting: %v", err)
						return
					}
					var out struct {
						Response struct {
							ConvertedObjects []json.RawMessage `json:"convertedObjects"`
							Result           struct{ Status, Message string }
						}
					}
					err = json.NewDecoder(resp.Body).Decode(&out)
					_ = resp.Body.Close()
					mu.Lock()
					codes[resp.StatusCode]++
					mu.Unlock()
					if resp.StatusCode == http.StatusOK && (err != nil || out.Response.Result.Status != "Success") {
						t.Errorf("the conversion failed: %v %s", err, out.Response.Result.Message)
					}
				}
			}()
		}
		wg.Wait()
		peak := procStatusKiB(t, host, "VmHWM")
		if resetPeak != nil {
			t.Logf("could not reset the peak RSS (%v): VmHWM includes the host's start", resetPeak)
		}
		growth := (peak - idle) * 1024
		t.Logf("18 conversions of %d MiB, 6 at a time, answered %v; host RSS: idle %d MiB, peak %d MiB (+%d MiB) with a budget of %d MiB in flight",
			len(review)>>20, codes, idle/1024, peak/1024, growth>>20, limitsMaxBytesInFlight>>20)
		if codes[http.StatusOK] == 0 {
			t.Errorf("no conversion was served: %v", codes)
		}
		if growth > 2*conversionMemoryFactor*limitsMaxBytesInFlight {
			t.Errorf("the host's peak RSS grew by %d MiB over its idle RSS, more than twice %d times the budget of %d MiB in flight",
				growth>>20, conversionMemoryFactor, limitsMaxBytesInFlight>>20)
		}
	})

	t.Run("slow clients are cut off at the read timeouts", func(t *testing.T) {
		const slowBodies, slowHeaders = 30, 5
		// Generous: the host cuts them off at its read timeouts; the limit
		// leaves room for a loaded machine.
		const limit = limitsReadTimeout + 20*time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 2*limit)
		defer cancel()
		var wg sync.WaitGroup
		held := make(chan string, slowBodies+slowHeaders)
		slow := func(what, headers, trickle string) {
			defer wg.Done()
			conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // The test's own host.
			if err != nil {
				held <- fmt.Sprintf("%s: %v", what, err)
				return
			}
			defer func() { _ = conn.Close() }()
			start := time.Now()
			if _, err := io.WriteString(conn, headers); err != nil {
				held <- fmt.Sprintf("%s: %v", what, err)
				return
			}
			// A byte every 100ms, until the server closes the connection.
			go func() {
				for i := 0; ctx.Err() == nil && i < len(trickle); i++ {
					if _, err := conn.Write([]byte{trickle[i]}); err != nil {
						return
					}
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}()
			_ = conn.SetReadDeadline(time.Now().Add(limit))
			_, err = io.Copy(io.Discard, bufio.NewReader(conn))
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() {
				held <- fmt.Sprintf("%s: still open after %s", what, time.Since(start).Round(time.Millisecond))
				return
			}
			t.Logf("%s: closed by the host after %s", what, time.Since(start).Round(time.Millisecond))
		}
		body := strings.Repeat(" ", 100_000)
		for range slowBodies {
			wg.Add(1)
			go slow("a slow body", "POST /convert HTTP/1.1\r\nHost: host\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", body)
		}
		for range slowHeaders {
			wg.Add(1)
			go slow("slow headers", "POST /convert HTTP/1.1\r\n", "Content-Type: application/json\r\n"+strings.Repeat("X-Slow: x\r\n", 1000))
		}
		wg.Wait()
		close(held)
		for msg := range held {
			t.Error(msg)
		}
	})
}

// conversionReviewOfSize is a ConversionReview of MaintenanceWindows at
// v1beta1 to convert to v1, of about size bytes.
func conversionReviewOfSize(ns string, size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u-1","desiredAPIVersion":"examples.polyop.dev/v1","objects":[`)
	note := strings.Repeat("n", 900)
	for i := 0; b.Len() < size-2048; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"apiVersion":"examples.polyop.dev/v1beta1","kind":"MaintenanceWindow",`+
			`"metadata":{"namespace":%q,"name":"w-%d","uid":"uid-%d","annotations":{"note":%q}},`+
			`"spec":{"schedule":{"start":"2026-01-01T00:00:00Z","every":"24h"},"duration":"1h"}}`, ns, i, i, note)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

// spaces is a body of n spaces, made as it is read.
type spaces struct{ n int }

func (z *spaces) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	n := min(len(p), z.n)
	for i := range p[:n] {
		p[i] = ' '
	}
	z.n -= n
	return n, nil
}
