package webhookserver_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/webhookserver"
)

// reads counts the bytes read from a body.
type reads struct {
	r io.Reader
	n int
}

func (c *reads) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// echo answers with the body's length, or the error reading it.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, _ = io.WriteString(w, strings.Repeat("x", len(body)))
})

func TestBounds(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		contentType string
		body        string
		undeclared  bool // the request declares no length (a chunked body)
		wantCode    int
		wantMsg     string
		wantRead    bool // the body is read
	}{
		"if the content type is application/json, then the request is served": {
			contentType: "application/json", body: "{}", wantCode: http.StatusOK, wantRead: true,
		},
		"if the content type has parameters, then the request is served": {
			contentType: "application/json; charset=utf-8", body: "{}", wantCode: http.StatusOK, wantRead: true,
		},
		"if the content type is another, then it is a 415 before the body is read": {
			contentType: "application/x-www-form-urlencoded", body: "a=b", wantCode: http.StatusUnsupportedMediaType,
			wantMsg: `the content type is "application/x-www-form-urlencoded": /hook accepts application/json only, as the API server sends`,
		},
		"if there is no content type, then it is a 415": {
			body: "{}", wantCode: http.StatusUnsupportedMediaType, wantMsg: `the content type is "": /hook accepts application/json only`,
		},
		"if the body declares more than the limit, then it is a 413 before the body is read, naming the remedy": {
			contentType: "application/json", body: strings.Repeat(" ", 101), wantCode: http.StatusRequestEntityTooLarge,
			wantMsg: "the request body of 101 bytes is over the limit of 100 bytes for /hook: raise --hook-limit",
		},
		"if the body is the limit, then the request is served": {
			contentType: "application/json", body: strings.Repeat(" ", 100), wantCode: http.StatusOK, wantRead: true,
		},
		"if an undeclared body is over the limit, then it is cut off at the limit": {
			contentType: "application/json", body: strings.Repeat(" ", 1000), undeclared: true, wantCode: http.StatusRequestEntityTooLarge,
			wantMsg: "http: request body too large", wantRead: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := webhookserver.New(webhookserver.Options{MaxBytesInFlight: 1000})
			s.Register("/hook", echo, webhookserver.BodyLimit{Bytes: 100, Hint: "raise --hook-limit"})
			body := &reads{r: strings.NewReader(tc.body)}
			r := httptest.NewRequest(http.MethodPost, "/hook", body)
			r.ContentLength = int64(len(tc.body))
			if tc.undeclared {
				r.ContentLength = -1
			}
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			if w.Code != tc.wantCode || !strings.Contains(w.Body.String(), tc.wantMsg) {
				t.Errorf("answered %d %q, want %d with %q", w.Code, w.Body.String(), tc.wantCode, tc.wantMsg)
			}
			if read := body.n > 0; read != tc.wantRead {
				t.Errorf("%d bytes of the body were read", body.n)
			}
			if tc.undeclared && body.n > 100+512 {
				t.Errorf("%d bytes of the body were read, past the limit of 100", body.n)
			}
		})
	}
}

// TestBudgetOfBytesInFlight holds most of the budget with one request: a
// request that does not fit in the rest is answered 429 with Retry-After,
// one that fits is served, and once the first is answered the budget is
// whole again.
func TestBudgetOfBytesInFlight(t *testing.T) {
	t.Parallel()
	s := webhookserver.New(webhookserver.Options{MaxBytesInFlight: 100, BudgetHint: "raise --budget"})
	entered, release := make(chan struct{}), make(chan struct{})
	s.Register("/hold", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	}), webhookserver.BodyLimit{Bytes: 100})
	s.Register("/hook", echo, webhookserver.BodyLimit{Bytes: 100})
	send := func(path string, size int, undeclared bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(strings.Repeat(" ", size)))
		if undeclared {
			r.ContentLength = -1
		}
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w
	}

	held := make(chan *httptest.ResponseRecorder)
	go func() { held <- send("/hold", 80, false) }()
	<-entered

	start := time.Now()
	w := send("/hook", 30, false)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" ||
		w.Body.String() != "the webhook server has its budget of 100 bytes of requests in flight taken: retry later, or raise --budget\n" {
		t.Errorf("a request past the budget was answered %d %q (Retry-After %q), want a 429 with Retry-After 1",
			w.Code, w.Body.String(), w.Header().Get("Retry-After"))
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Errorf("a request past the budget was refused after %s, without waiting for room", waited)
	}
	// A body of undeclared length holds its path's limit: it does not fit.
	if w := send("/hook", 10, true); w.Code != http.StatusTooManyRequests {
		t.Errorf("a body of undeclared length was answered %d while the budget has 20 bytes left, want a 429", w.Code)
	}
	if w := send("/hook", 20, false); w.Code != http.StatusOK {
		t.Errorf("a request that fits the budget was answered %d %q", w.Code, w.Body.String())
	}

	close(release)
	if w := <-held; w.Code != http.StatusOK {
		t.Errorf("the request holding the budget was answered %d", w.Code)
	}
	if w := send("/hook", 100, true); w.Code != http.StatusOK {
		t.Errorf("with the budget whole again, a request of the whole budget was answered %d %q", w.Code, w.Body.String())
	}
}
