// Package metricsauth guards the host's metrics endpoint (--metrics-secure):
// a request must carry a bearer token the API server authenticates
// (TokenReview) for a user it authorizes to get the request's path
// (SubjectAccessReview of a non-resource URL), as controller-runtime's
// metrics/filters.WithAuthenticationAndAuthorization does.
//
// It does what that filter does with k8s.io/apiserver's delegating
// authenticator and authorizer, with the two reviews alone: the same
// requests to the API server, the same cache lifetimes (1 minute for a
// token's review, 5 minutes for an allowed request, 30 seconds for a denied
// one), the same retries of a review that failed for a transient reason, the
// same answers (401, 403, 500) and logs. One answer differs: a token the API
// server rejects is answered 401 Unauthorized, as the API server answers it,
// where controller-runtime's filter answers 500. Without k8s.io/apiserver the
// polyop binary is about 2.3 MB smaller.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// What controller-runtime's filter configures k8s.io/apiserver's delegating
// authenticator and authorizer with.
const (
	// tokenTTL is how long the review of a token, authenticated or not, is
	// reused.
	tokenTTL = time.Minute
	// allowTTL and denyTTL are how long an authorization, allowed or not, is
	// reused.
	allowTTL = 5 * time.Minute
	denyTTL  = 30 * time.Second
	// reviewTimeout bounds each review, retries included.
	reviewTimeout = 10 * time.Second
	// cacheSize bounds each cache's entries.
	cacheSize = 4096
)

// retryBackoff is how a review that failed for a transient reason is retried
// (k8s.io/apiserver's DefaultAuthWebhookRetryBackoff).
var retryBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// authenticatedGroup is the group every authenticated user is in; the API
// server's authenticator adds it to a user's groups, so this filter does too.
const authenticatedGroup = "system:authenticated"

// WithAuthenticationAndAuthorization is a metrics server's FilterProvider
// (metricsserver.Options.FilterProvider): its filter answers a request to the
// metrics endpoint only when its bearer token is one the API server at config
// authenticates, for a user it authorizes to use the request's method (in
// lower case: get) on the request's path (/metrics).
//
// The host needs create on tokenreviews.authentication.k8s.io and
// subjectaccessreviews.authorization.k8s.io; a scraper needs a role with
// nonResourceURLs: ["/metrics"], verbs: ["get"].
func WithAuthenticationAndAuthorization(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	g, err := newGuard(config, httpClient)
	if err != nil {
		return nil, err
	}
	return g.filter, nil
}

// newGuard returns a guard reviewing through the API server at config.
func newGuard(config *rest.Config, httpClient *http.Client) (*guard, error) {
	authn, err := authenticationv1client.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1client.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	return &guard{
		tokens:  authn.TokenReviews(),
		access:  authz.SubjectAccessReviews(),
		users:   newTTLCache[[sha256.Size]byte, *authenticationv1.UserInfo](cacheSize),
		allowed: newTTLCache[string, bool](cacheSize),
		now:     time.Now,
		backoff: retryBackoff,
	}, nil
}

// guard authenticates and authorizes requests through the API server.
type guard struct {
	tokens authenticationv1client.TokenReviewInterface
	access authorizationv1client.SubjectAccessReviewInterface
	// users holds the user each token reviewed as, nil for a token that was
	// not authenticated, by the token's hash.
	users *ttlCache[[sha256.Size]byte, *authenticationv1.UserInfo]
	// allowed holds the decision for each SubjectAccessReview, by its spec.
	allowed *ttlCache[string, bool]
	now     func() time.Time
	backoff wait.Backoff
}

// filter wraps handler so that it serves authenticated and authorized
// requests only (a metricsserver.Filter).
func (g *guard) filter(log logr.Logger, handler http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		token, ok := bearerToken(req)
		if !ok {
			log.V(4).Info("Authentication failed", "reason", "no bearer token")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		user, err := g.authenticate(ctx, token)
		if err != nil {
			log.Error(err, "Authentication failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if user == nil {
			log.V(4).Info("Authentication failed", "reason", "the API server did not authenticate the token")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		// The token is not the handler's to see, as the API server removes
		// it from requests it authenticated.
		req.Header.Del("Authorization")

		allowed, reason, err := g.authorize(ctx, user, strings.ToLower(req.Method), req.URL.Path)
		if err != nil {
			msg := fmt.Sprintf("Authorization for user %s failed", user.Username)
			log.Error(err, msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		if !allowed {
			msg := fmt.Sprintf("Authorization denied for user %s", user.Username)
			log.V(4).Info(fmt.Sprintf("%s: %s", msg, reason))
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		handler.ServeHTTP(w, req)
	}), nil
}

// bearerToken returns the request's bearer token, as the API server reads
// it: "Authorization: Bearer <token>", the scheme in any case.
func bearerToken(req *http.Request) (string, bool) {
	auth := strings.TrimSpace(req.Header.Get("Authorization"))
	parts := strings.SplitN(auth, " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}

// authenticate returns the user the API server reviews token as, nil when it
// does not authenticate it; an error when the review failed.
func (g *guard) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	key := tokenKey(token)
	if user, ok := g.users.get(key, g.now()); ok {
		return user, nil
	}
	var review *authenticationv1.TokenReview
	err := g.retry(ctx, func(ctx context.Context) (err error) {
		review, err = g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reviewing the token: %w", err)
	}
	var user *authenticationv1.UserInfo
	if review.Status.Authenticated {
		user = review.Status.User.DeepCopy()
		if !slices.Contains(user.Groups, authenticatedGroup) {
			user.Groups = append(user.Groups, authenticatedGroup)
		}
	}
	g.users.put(key, user, g.now(), tokenTTL)
	return user, nil
}

// tokenKey is the key of token's review: its hash, so that the cache keeps
// no token.
func tokenKey(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// authorize tells whether the API server allows user verb on the
// non-resource URL path, and why not; an error when the review failed. A
// review that neither allows nor denies does not allow.
func (g *guard) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, string, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	key, err := json.Marshal(spec)
	if err != nil {
		return false, "", err
	}
	if allowed, ok := g.allowed.get(string(key), g.now()); ok {
		return allowed, "the API server did not allow it (cached)", nil
	}
	var review *authorizationv1.SubjectAccessReview
	err = g.retry(ctx, func(ctx context.Context) (err error) {
		review, err = g.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return false, "", fmt.Errorf("reviewing the access: %w", err)
	}
	allowed := review.Status.Allowed
	ttl := denyTTL
	if allowed {
		ttl = allowTTL
	}
	g.allowed.put(string(key), allowed, g.now(), ttl)
	return allowed, review.Status.Reason, nil
}

// retry calls review, within reviewTimeout, until it succeeds, fails for a
// reason other than a transient one, or g.backoff's steps run out.
func (g *guard) retry(ctx context.Context, review func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, g.backoff, func(ctx context.Context) (bool, error) {
		last = review(ctx)
		switch {
		case last == nil:
			return true, nil
		case transient(last):
			return false, nil
		}
		return false, last
	})
	if last != nil {
		return last
	}
	return err
}

// transient tells whether a review that failed with err may succeed when
// retried (k8s.io/apiserver's webhook.DefaultShouldRetry).
func transient(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, retry := apierrors.SuggestsClientDelay(err)
	return retry
}
