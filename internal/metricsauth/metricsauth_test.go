package metricsauth

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/polyop/polyop/internal/testenv"
)

// The tests review tokens with a real API server, started the first time a
// test needs it and stopped by TestMain.
var shared testenv.Lazy

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// tokens are the tokens of two ServiceAccounts of the test's own: one bound
// to a ClusterRole allowing get on /metrics, one allowed nothing.
type tokens struct {
	reader, stranger string
	// readerUser is the reader's user name.
	readerUser string
}

// makeTokens makes the ServiceAccounts, the role and the binding of tokens,
// named after the test, and asks the API server for their tokens.
func makeTokens(t *testing.T, config *rest.Config) tokens {
	t.Helper()
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("metrics-%d", time.Now().UnixNano())
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name + "-reader", Namespace: "default"}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: "default"}}
		if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, account, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	return tokens{
		reader:     token(name + "-reader"),
		stranger:   token(name + "-stranger"),
		readerUser: "system:serviceaccount:default:" + name + "-reader",
	}
}

// reviews counts the TokenReviews and SubjectAccessReviews sent through it.
type reviews struct {
	next           http.RoundTripper
	tokens, access atomic.Int32
}

func (r *reviews) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case strings.HasSuffix(req.URL.Path, "/tokenreviews"):
		r.tokens.Add(1)
	case strings.HasSuffix(req.URL.Path, "/subjectaccessreviews"):
		r.access.Add(1)
	}
	return r.next.RoundTrip(req)
}

// counts returns how many reviews of each kind went through r.
func (r *reviews) counts() [2]int32 { return [2]int32{r.tokens.Load(), r.access.Load()} }

// guarded is a guard and the endpoint its filter guards.
type guarded struct {
	*guard
	reviews *reviews
	url     string
	// sawToken is set when the endpoint was handed a request that still
	// carried an Authorization header.
	sawToken atomic.Bool
}

// newGuarded serves, until the test ends, an endpoint guarded by a guard
// reviewing through the API server at config.
func newGuarded(t *testing.T, config *rest.Config) *guarded {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		t.Fatal(err)
	}
	// HTTPClientFor may return http.DefaultClient: wrap a copy.
	next := httpClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	r := &reviews{next: next}
	g, err := newGuard(config, &http.Client{Transport: r, Timeout: httpClient.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	gd := &guarded{guard: g, reviews: r}
	h, err := g.filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "" {
			gd.sawToken.Store(true)
		}
		fmt.Fprint(w, "metrics")
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	gd.url = srv.URL
	return gd
}

// get asks the endpoint for path with the Authorization header auth ("" for
// none) and returns the status and the body.
func (g *guarded) get(t *testing.T, path, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, g.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(body))
}

func TestTheEndpointAnswersAsTheAPIServerReviewsTheRequest(t *testing.T) {
	t.Parallel()
	config := shared.Get(t).Config
	tok := makeTokens(t, config)
	g := newGuarded(t, config)
	for _, tc := range []struct {
		name, path, auth string
		status           int
		body             string
	}{
		{"if the request has no token, then it is unauthorized", "/metrics", "", http.StatusUnauthorized, "Unauthorized"},
		{"if the Authorization header is not a bearer token, then it is unauthorized", "/metrics", "Basic " + tok.reader, http.StatusUnauthorized, "Unauthorized"},
		{"if the bearer token is empty, then it is unauthorized", "/metrics", "Bearer ", http.StatusUnauthorized, "Unauthorized"},
		{"if the API server does not authenticate the token, then it is unauthorized", "/metrics", "Bearer not-a-token", http.StatusUnauthorized, "Unauthorized"},
		{"if the token's user may get the path, then the endpoint answers", "/metrics", "Bearer " + tok.reader, http.StatusOK, "metrics"},
		{"if the scheme is in another case, then the token is read all the same", "/metrics", "bearer " + tok.reader, http.StatusOK, "metrics"},
		{"if the token's user may not get the path, then it is forbidden", "/debug", "Bearer " + tok.reader, http.StatusForbidden, "Authorization denied for user " + tok.readerUser},
		{"if the token's user may get nothing, then it is forbidden", "/metrics", "Bearer " + tok.stranger, http.StatusForbidden, "Authorization denied for user system:serviceaccount:default:"},
	} {
		status, body := g.get(t, tc.path, tc.auth)
		if status != tc.status || !strings.HasPrefix(body, tc.body) {
			t.Errorf("%s: got %d %q, want %d %q", tc.name, status, body, tc.status, tc.body)
		}
	}
	if g.sawToken.Load() {
		t.Error("the endpoint was handed the Authorization header of an authenticated request")
	}
}

func TestReviewsAreReusedForTheirLifetimes(t *testing.T) {
	t.Parallel()
	config := shared.Get(t).Config
	tok := makeTokens(t, config)
	g := newGuarded(t, config)
	clk := testingclock.NewFakeClock(time.Now())
	g.now = clk.Now

	expect := func(what, token string, status int, reviews [2]int32) {
		t.Helper()
		if got, _ := g.get(t, "/metrics", "Bearer "+token); got != status {
			t.Errorf("%s: got %d, want %d", what, got, status)
		}
		if got := g.reviews.counts(); got != reviews {
			t.Errorf("%s: %d TokenReviews and %d SubjectAccessReviews so far, want %d and %d", what, got[0], got[1], reviews[0], reviews[1])
		}
	}
	expect("the first request", tok.reader, http.StatusOK, [2]int32{1, 1})
	expect("the same request at once", tok.reader, http.StatusOK, [2]int32{1, 1})
	clk.Step(tokenTTL)
	expect("a minute later", tok.reader, http.StatusOK, [2]int32{2, 1})
	clk.Step(allowTTL - tokenTTL)
	expect("five minutes later", tok.reader, http.StatusOK, [2]int32{3, 2})

	expect("the first request of a stranger", tok.stranger, http.StatusForbidden, [2]int32{4, 3})
	expect("the same request at once", tok.stranger, http.StatusForbidden, [2]int32{4, 3})
	clk.Step(denyTTL)
	expect("30s later", tok.stranger, http.StatusForbidden, [2]int32{4, 4})

	expect("a token the API server does not know", "not-a-token", http.StatusUnauthorized, [2]int32{5, 4})
	expect("the same token at once", "not-a-token", http.StatusUnauthorized, [2]int32{5, 4})
}

// failingAPIServer answers every request with the Status of code and reason,
// and counts them.
func failingAPIServer(t *testing.T, code int, reason string) (*rest.Config, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":"it failed"}`, reason, code)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}, &calls
}

func TestAReviewThatFailsIsAnInternalError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		code   int
		reason string
		calls  int32
	}{
		{"if the API server fails, then the review is retried", http.StatusInternalServerError, "InternalError", 3},
		{"if the host may not review tokens, then the review is not retried", http.StatusForbidden, "Forbidden", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			config, calls := failingAPIServer(t, tc.code, tc.reason)
			g := newGuarded(t, config)
			g.backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}
			status, body := g.get(t, "/metrics", "Bearer a-token")
			if status != http.StatusInternalServerError || body != "Authentication failed" {
				t.Errorf("got %d %q, want 500 \"Authentication failed\"", status, body)
			}
			if got := calls.Load(); got != tc.calls {
				t.Errorf("%d TokenReviews, want %d", got, tc.calls)
			}
			// A failure is not remembered: the next request reviews again.
			g.get(t, "/metrics", "Bearer a-token")
			if got := calls.Load(); got != 2*tc.calls {
				t.Errorf("after a second request, %d TokenReviews, want %d", got, 2*tc.calls)
			}
		})
	}
}

func TestAnAuthorizationThatFailsIsAnInternalError(t *testing.T) {
	t.Parallel()
	config, calls := failingAPIServer(t, http.StatusForbidden, "Forbidden")
	g := newGuarded(t, config)
	g.users.put(tokenKey("a-token"), &authenticationv1.UserInfo{Username: "scraper"}, g.now(), tokenTTL)
	status, body := g.get(t, "/metrics", "Bearer a-token")
	if status != http.StatusInternalServerError || body != "Authorization for user scraper failed" {
		t.Errorf("got %d %q, want 500 \"Authorization for user scraper failed\"", status, body)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("%d SubjectAccessReviews, want 1", got)
	}
}

func TestTheCacheKeepsAtMostItsSize(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	c := newTTLCache[int, int](2)
	c.put(1, 10, t0, time.Minute)
	c.put(2, 20, t0, time.Second)
	if v, ok := c.get(2, t0); !ok || v != 20 {
		t.Errorf("get(2) = %d, %v, want 20, true", v, ok)
	}
	if _, ok := c.get(2, t0.Add(time.Second)); ok {
		t.Error("an entry is returned once its lifetime has passed")
	}
	// Full: the expired entry goes first.
	c.put(3, 30, t0.Add(time.Second), time.Minute)
	if _, ok := c.get(1, t0.Add(time.Second)); !ok {
		t.Error("adding to a full cache dropped a live entry while an expired one was there")
	}
	// Full of live entries: one of them goes.
	c.put(4, 40, t0.Add(time.Second), time.Minute)
	if n := len(c.entries); n != 2 {
		t.Errorf("the cache holds %d entries, want at most 2", n)
	}
	if v, ok := c.get(4, t0.Add(time.Second)); !ok || v != 40 {
		t.Errorf("get(4) = %d, %v, want 40, true", v, ok)
	}
}
