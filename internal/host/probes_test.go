package host

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadyzVerboseExplainsTheHostsOwnChecks(t *testing.T) {
	t.Parallel()
	p := newProbes()
	p.addReadyz("sidecar", func(*http.Request) error {
		return errors.New("sidecar at unix:///run/s.sock is unreachable:\n connection refused")
	}, true)
	p.addReadyz("other", func(*http.Request) error { return errors.New("secret detail") }, false)
	p.addReadyz("informers", func(*http.Request) error { return nil }, true)
	mux := http.NewServeMux()
	ready := &explainedHandler{Handler: p.readyz, explained: p.explained}
	mux.Handle("/readyz", http.StripPrefix("/readyz", ready))
	mux.Handle("/readyz/", http.StripPrefix("/readyz", ready))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	for name, tc := range map[string]struct {
		path      string
		wantCode  int
		want, not []string
	}{
		"if asked verbosely, then the sidecar's failure says why, on one line, and another check's reason stays withheld": {
			path: "/readyz?verbose", wantCode: 500,
			want: []string{"[-]sidecar failed: sidecar at unix:///run/s.sock is unreachable: connection refused\n", "[-]other failed: reason withheld\n", "[+]informers ok\n", "healthz check failed\n"},
			not:  []string{"secret detail"},
		},
		"if not asked verbosely, then the answer is controller-runtime's": {
			path: "/readyz", wantCode: 500,
			want: []string{"[-]sidecar failed: reason withheld\n"},
			not:  []string{"unreachable"},
		},
		"if the failing checks are excluded, then it passes": {
			path: "/readyz?verbose&exclude=sidecar&exclude=other", wantCode: 200,
			want: []string{"[+]sidecar excluded: ok\n", "[+]other excluded: ok\n", "healthz check passed\n"},
		},
		"if one check is asked by its path, then its error is given, as controller-runtime does": {
			path: "/readyz/sidecar", wantCode: 500,
			want: []string{"is unreachable"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := get(tc.path)
			if code != tc.wantCode {
				t.Errorf("GET %s: %d, want %d\n%s", tc.path, code, tc.wantCode, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s answered\n%s\nwant %q in it", tc.path, body, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(body, n) {
					t.Errorf("GET %s answered\n%s\nwant no %q in it", tc.path, body, n)
				}
			}
		})
	}
}
