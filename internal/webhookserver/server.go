package webhookserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/semaphore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

const (
	// DefaultReadHeaderTimeout is how long the server waits for a request's
	// headers unless configured otherwise. The API server sends them at once.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout is how long the server waits for a whole request,
	// headers and body, counted from its first byte, unless configured
	// otherwise. The API server waits 30 seconds at most for a webhook
	// (timeoutSeconds is at most 30; a conversion waits 30), so a body still
	// arriving after that belongs to a call the API server gave up on.
	DefaultReadTimeout = 30 * time.Second
	// DefaultMaxBytesInFlight is the budget of request bytes in flight
	// unless configured otherwise: room for three conversion reviews of the
	// default largest size (16 MiB), or six admission reviews of the largest
	// size (7 MiB). A conversion in flight holds about three times its body,
	// so the host's memory for webhooks stays well within the 256 MiB of the
	// shipped host container.
	DefaultMaxBytesInFlight = 48 << 20

	// idleTimeout is how long an idle keep-alive connection stays open:
	// controller-runtime's value, as long as the API server's client keeps
	// its idle connections (http.DefaultTransport's 90 seconds), so that the
	// server does not close a connection the client is about to reuse.
	idleTimeout = 90 * time.Second
	// maxHeaderBytes bounds a request's headers, as controller-runtime does.
	maxHeaderBytes = 1 << 20
	// budgetWait is how long a request waits for room in the budget of bytes
	// in flight before it is answered 429: long enough to ride out a burst,
	// short next to the API server's webhook timeouts (10 seconds by default
	// for admission, 30 for conversion), which the API server's retries of
	// the 429 then spend.
	budgetWait = time.Second
	// retryAfterSeconds is the Retry-After of a 429: the API server's client
	// waits that long, then sends the request again (up to ten times, within
	// the call's timeout).
	retryAfterSeconds = 1
)

// Options configure the server.
type Options struct {
	// Host is the address the server listens on. Defaults to "": every
	// address.
	Host string
	// Port is the port the server listens on. Defaults to 9443
	// (webhook.DefaultPort).
	Port int
	// CertDir holds the serving certificate and key, which the server
	// reloads when they change. Defaults to
	// <temp dir>/k8s-webhook-server/serving-certs, as in controller-runtime.
	CertDir string
	// CertName and KeyName are the files in CertDir. Default to tls.crt and
	// tls.key.
	CertName, KeyName string
	// TLSOpts change the server's TLS configuration, as in controller-runtime.
	// Defaults to none.
	TLSOpts []func(*tls.Config)
	// ReadHeaderTimeout is how long the server waits for a request's
	// headers. Defaults to DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// ReadTimeout is how long the server waits for a whole request, headers
	// and body. Defaults to DefaultReadTimeout.
	ReadTimeout time.Duration
	// MaxBytesInFlight is the budget of request bytes in flight across all
	// paths. Defaults to DefaultMaxBytesInFlight.
	MaxBytesInFlight int64
	// BudgetHint ends the message of a 429, saying how to raise the budget,
	// for example "raise --webhook-max-bytes-in-flight". Defaults to "".
	BudgetHint string
}

func (o Options) withDefaults() Options {
	if o.Port == 0 {
		o.Port = webhook.DefaultPort
	}
	if o.CertDir == "" {
		o.CertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}
	if o.CertName == "" {
		o.CertName = "tls.crt"
	}
	if o.KeyName == "" {
		o.KeyName = "tls.key"
	}
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.MaxBytesInFlight <= 0 {
		o.MaxBytesInFlight = DefaultMaxBytesInFlight
	}
	return o
}

// BodyLimit bounds the request bodies of one path.
type BodyLimit struct {
	// Bytes is the largest body the path accepts. Required.
	Bytes int64
	// Hint ends the message of a 413, saying how to raise the limit, for
	// example "raise --conversion-max-request-bytes". Defaults to "".
	Hint string
}

// Server is the host's webhook server. It implements controller-runtime's
// manager.Runnable, and serves on every replica, leader or not.
type Server struct {
	opts   Options
	mux    *http.ServeMux
	hooks  webhook.Server // registers paths on mux with controller-runtime's metrics; never started
	budget *semaphore.Weighted
	log    logr.Logger

	started       atomic.Bool
	collectQueued atomic.Bool
}

// New returns a server with opts.
func New(opts Options) *Server {
	opts = opts.withDefaults()
	mux := http.NewServeMux()
	return &Server{
		opts:   opts,
		mux:    mux,
		hooks:  webhook.NewServer(webhook.Options{WebhookMux: mux}),
		budget: semaphore.NewWeighted(opts.MaxBytesInFlight),
		log:    ctrl.Log.WithName("webhooks"),
	}
}

// Register serves h at path, behind the checks of the package doc: the
// content type, limit, and the budget of bytes in flight. It panics if path
// is registered already.
func (s *Server) Register(path string, h http.Handler, limit BodyLimit) {
	s.hooks.Register(path, s.bounded(path, h, limit))
}

// Registrar is what admission.Register registers its webhooks with: the
// server, with one body limit for all of them.
type Registrar struct {
	s     *Server
	limit BodyLimit
}

// WithLimit returns a Registrar that registers paths with limit.
func (s *Server) WithLimit(limit BodyLimit) Registrar { return Registrar{s: s, limit: limit} }

// Register serves h at path with the Registrar's limit.
func (r Registrar) Register(path string, h http.Handler) { r.s.Register(path, h, r.limit) }

// Handler is the server's handler, every registered path; for tests.
func (s *Server) Handler() http.Handler { return s.mux }

// NeedLeaderElection tells the manager that the server runs on every
// replica.
func (*Server) NeedLeaderElection() bool { return false }

// Start serves until ctx is done, then shuts down, giving requests in flight
// a minute to finish, as controller-runtime's server does.
func (s *Server) Start(ctx context.Context) error {
	log := s.log
	cfg := &tls.Config{NextProtos: []string{"h2"}}
	for _, op := range s.opts.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		watcher, err := certwatcher.New(filepath.Join(s.opts.CertDir, s.opts.CertName), filepath.Join(s.opts.CertDir, s.opts.KeyName))
		if err != nil {
			return fmt.Errorf("the webhook server's certificate: %w", err)
		}
		cfg.GetCertificate = watcher.GetCertificate
		go func() {
			if err := watcher.Start(ctx); err != nil {
				log.Error(err, "Watching the webhook server's certificate")
			}
		}()
	}
	listener, err := tls.Listen("tcp", s.address(), cfg)
	if err != nil {
		return fmt.Errorf("the webhook server cannot listen on %s (--webhook-host, --webhook-port): %w", s.address(), err)
	}
	srv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return ctx },
		Handler:           s.mux,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       idleTimeout,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		<-ctx.Done()
		log.Info("Shutting down webhook server with timeout of 1 minute")
		shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			log.Error(err, "Shutting down the webhook server")
		}
	}()
	s.started.Store(true)
	log.Info("Serving webhook server", "host", s.opts.Host, "port", s.opts.Port,
		"readHeaderTimeout", s.opts.ReadHeaderTimeout, "readTimeout", s.opts.ReadTimeout, "maxBytesInFlight", s.opts.MaxBytesInFlight)
	if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-closed
	return nil
}

// StartedChecker is a readiness check that passes once the server accepts
// TLS connections, as controller-runtime's.
func (s *Server) StartedChecker() healthz.Checker {
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // Only whether the server answers is checked.
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("the webhook server has not started yet")
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.address(), cfg)
		if err != nil {
			return fmt.Errorf("the webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}

func (s *Server) address() string {
	return net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port))
}
