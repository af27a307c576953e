package host

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/polyop/polyop/internal/admission"
	"github.com/polyop/polyop/internal/certs"
	"github.com/polyop/polyop/internal/conversion"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/webhookserver"
)

// WebhookOptions configure the host's webhook server, which serves the
// sidecar's admission webhooks and conversions. The server runs only when the
// sidecar declares webhooks or conversions, and on every replica, leader or
// not.
type WebhookOptions struct {
	// Port is the port the webhook server listens on; 0 turns the server off.
	// Defaults to 9443.
	Port int
	// Host is the address the webhook server listens on. Defaults to "": every
	// address.
	Host string
	// CertDir holds the serving certificate and key (tls.crt and tls.key,
	// as cert-manager's Secrets name them). Defaults to
	// <temp dir>/k8s-webhook-server/serving-certs, as in controller-runtime.
	CertDir string
	// CertName and KeyName are the files in CertDir. Default to tls.crt and
	// tls.key.
	CertName, KeyName string
	// EnableHTTP2 serves HTTP/2 as well as HTTP/1.1. Defaults to false:
	// HTTP/2 is off, as kubebuilder turns it off since the HTTP/2 Stream
	// Cancellation and Rapid Reset CVEs.
	EnableHTTP2 bool
	// AdmissionTimeout caps the deadline of each Default and Validate call;
	// the deadline also stays below the webhook's own timeout. Defaults to
	// admission.DefaultTimeout (3s).
	AdmissionTimeout time.Duration
	// ConversionTimeout caps the deadline of each Convert call. Defaults to
	// conversion.DefaultTimeout (10s).
	ConversionTimeout time.Duration
	// ConversionMaxRequestBytes is the largest ConversionReview the host
	// reads; a larger one is answered 413. Defaults to
	// conversion.DefaultMaxRequestBytes (16 MiB), which says where it comes
	// from. An AdmissionReview is bounded by admission.MaxRequestBytes (7
	// MiB), as in controller-runtime.
	ConversionMaxRequestBytes int64
	// MaxBytesInFlight is the budget of request bytes that the webhook
	// server holds at once across all requests: each holds its declared
	// length until it is answered, and one that does not fit within a second
	// is answered 429 with Retry-After, which the API server retries. It must
	// hold the largest request: at least ConversionMaxRequestBytes and
	// admission.MaxRequestBytes. Defaults to
	// webhookserver.DefaultMaxBytesInFlight (48 MiB).
	MaxBytesInFlight int64
	// ReadHeaderTimeout is how long the webhook server waits for a request's
	// headers. Defaults to webhookserver.DefaultReadHeaderTimeout (10s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout is how long the webhook server waits for a whole request,
	// headers and body; a client still sending after that is cut off.
	// Defaults to webhookserver.DefaultReadTimeout (30s), the API server's
	// longest webhook timeout.
	ReadTimeout time.Duration

	// SelfSigned makes the host make its own CA and serving certificate, keep
	// them in the Secret CertSecret, write them to CertDir and set the
	// caBundle of the webhook configurations named ConfigurationName and of
	// the conversion stanza of the CRDs the sidecar converts. Defaults to
	// false: CertDir holds a certificate from elsewhere (cert-manager).
	SelfSigned bool
	// ServiceName and ServiceNamespace name the Service in front of the
	// webhook server; the self-made certificate covers its DNS names.
	// Default to "<sidecar name>-webhook" and
	// description.DefaultServiceNamespace(): $POD_NAMESPACE, else the service
	// account's namespace, else "default", as for `host webhooks`.
	ServiceName, ServiceNamespace string
	// CertSecret is the Secret, in ServiceNamespace, that keeps the self-made
	// certificate. Defaults to "<sidecar name>-webhook-cert".
	CertSecret string
	// ConfigurationName names the MutatingWebhookConfiguration and the
	// ValidatingWebhookConfiguration whose caBundle the host sets, as
	// `host webhooks --name` names them. Defaults to the sidecar's name.
	ConfigurationName string
	// CertHosts are more DNS names or IP addresses for the self-made
	// certificate, for example 127.0.0.1 for an API server that calls a host
	// running outside the cluster. Defaults to none.
	CertHosts []string
}

// DefaultWebhookOptions returns WebhookOptions holding every default that is
// not derived from the sidecar's name.
func DefaultWebhookOptions() WebhookOptions {
	return WebhookOptions{
		Port:              webhook.DefaultPort,
		CertDir:           filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"),
		CertName:          "tls.crt",
		KeyName:           "tls.key",
		AdmissionTimeout:  admission.DefaultTimeout,
		ConversionTimeout: conversion.DefaultTimeout,

		ConversionMaxRequestBytes: conversion.DefaultMaxRequestBytes,
		MaxBytesInFlight:          webhookserver.DefaultMaxBytesInFlight,
		ReadHeaderTimeout:         webhookserver.DefaultReadHeaderTimeout,
		ReadTimeout:               webhookserver.DefaultReadTimeout,
	}
}

// BindFlags registers a flag for every webhook option on fs.
func (o *WebhookOptions) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.Port, "webhook-port", o.Port,
		"The port the webhook server (admission and conversion) listens on; 0 turns it off. It runs only when the sidecar declares webhooks.")
	fs.StringVar(&o.Host, "webhook-host", o.Host, "The address the webhook server listens on (default: every address).")
	fs.StringVar(&o.CertDir, "webhook-cert-dir", o.CertDir, "The directory holding the webhook server's certificate and key.")
	fs.StringVar(&o.CertName, "webhook-cert-name", o.CertName, "The webhook server's certificate file in --webhook-cert-dir.")
	fs.StringVar(&o.KeyName, "webhook-key-name", o.KeyName, "The webhook server's key file in --webhook-cert-dir.")
	fs.BoolVar(&o.EnableHTTP2, "webhook-enable-http2", o.EnableHTTP2,
		"Serve HTTP/2 on the webhook server; off by default because of the HTTP/2 Rapid Reset and Stream Cancellation CVEs.")
	fs.DurationVar(&o.AdmissionTimeout, "admission-timeout", o.AdmissionTimeout,
		"The longest the host waits for the sidecar's answer to an admission call; it also stays below each webhook's timeout.")
	fs.DurationVar(&o.ConversionTimeout, "conversion-timeout", o.ConversionTimeout,
		"The longest the host waits for the sidecar's answer to a conversion.")
	fs.Int64Var(&o.ConversionMaxRequestBytes, "conversion-max-request-bytes", o.ConversionMaxRequestBytes,
		"The largest ConversionReview the webhook server reads, in bytes; a larger one is answered 413. A list served at another version than the stored one is converted in one review with all its objects: raise this for large lists.")
	fs.Int64Var(&o.MaxBytesInFlight, "webhook-max-bytes-in-flight", o.MaxBytesInFlight,
		"The request bytes the webhook server holds at once, across all requests, in bytes; a request that does not fit is answered 429 with Retry-After, which the API server retries. At least --conversion-max-request-bytes and 7 MiB (the largest AdmissionReview).")
	fs.DurationVar(&o.ReadHeaderTimeout, "webhook-read-header-timeout", o.ReadHeaderTimeout,
		"How long the webhook server waits for a request's headers.")
	fs.DurationVar(&o.ReadTimeout, "webhook-read-timeout", o.ReadTimeout,
		"How long the webhook server waits for a whole request, headers and body; a client still sending after that is cut off.")
	fs.BoolVar(&o.SelfSigned, "webhook-self-signed", o.SelfSigned,
		"Make a CA and serving certificate, keep them in --webhook-cert-secret, and set the caBundle of the webhook configurations and CRD conversions the host serves.")
	fs.StringVar(&o.ServiceName, "webhook-service-name", o.ServiceName,
		`The Service in front of the webhook server, for the self-made certificate (default "<sidecar name>-webhook").`)
	fs.StringVar(&o.ServiceNamespace, "webhook-service-namespace", o.ServiceNamespace,
		`The namespace of that Service and of --webhook-cert-secret (default: $POD_NAMESPACE, else the service account's namespace, else "default"; host webhooks --service-namespace defaults the same way).`)
	fs.StringVar(&o.CertSecret, "webhook-cert-secret", o.CertSecret,
		`The Secret keeping the self-made certificate (default "<sidecar name>-webhook-cert").`)
	fs.StringVar(&o.ConfigurationName, "webhook-configuration-name", o.ConfigurationName,
		"The webhook configurations whose caBundle the host sets with --webhook-self-signed, as host webhooks --name names them (default: the sidecar's name).")
	fs.Var((*stringList)(&o.CertHosts), "webhook-cert-hosts",
		"More DNS names or IP addresses for the self-made certificate, such as 127.0.0.1; repeat or separate with commas.")
}

// setupWebhooks adds the webhook server to mgr when the sidecar declares
// webhooks or conversions: one mutating and one validating endpoint per kind,
// and the conversion endpoint, served by sc. opts hold the defaults the
// sidecar's name gives (withDefaults).
func setupWebhooks(ctx context.Context, cfg *rest.Config, mgr ctrl.Manager, probes *probes, sc *sidecar.Client, res *description.Resolved, opts WebhookOptions) error {
	desc := res.Description
	if len(desc.Webhooks) == 0 && len(desc.Conversions) == 0 {
		return nil
	}
	log := ctrl.Log.WithName("webhooks")
	if opts.Port == 0 {
		log.Info("The webhook server is off (--webhook-port 0): the sidecar's webhooks and conversions are not served",
			"webhooks", len(desc.Webhooks), "conversions", len(desc.Conversions))
		return nil
	}
	if err := opts.validateBounds(); err != nil {
		return err
	}
	crds := res.CRDNames()

	files := certs.Files{Dir: opts.CertDir, CertName: opts.CertName, KeyName: opts.KeyName}
	hosts := certs.ServiceHosts(opts.ServiceName, opts.ServiceNamespace, opts.CertHosts...)
	if opts.SelfSigned {
		c, err := directClient(cfg)
		if err != nil {
			return err
		}
		injector := &certs.Injector{
			Client: c,
			Provisioner: &certs.Provisioner{
				Client: c,
				Secret: client.ObjectKey{Namespace: opts.ServiceNamespace, Name: opts.CertSecret},
				Hosts:  hosts,
				Files:  files,
				Log:    log,
			},
			CRDs: crds,
			Log:  log,
		}
		if len(desc.Webhooks) > 0 {
			injector.MutatingWebhookConfigurations = []string{opts.ConfigurationName}
			injector.ValidatingWebhookConfigurations = []string{opts.ConfigurationName}
		}
		// The server reads the files when it starts: make them first.
		if _, err := injector.Provisioner.Ensure(ctx); err != nil {
			return err
		}
		if err := mgr.Add(injector); err != nil {
			return err
		}
	} else {
		made, err := certs.EnsureFiles(files, append([]string{"localhost", "127.0.0.1", "::1"}, hosts...))
		if err != nil {
			return fmt.Errorf("the webhook server's certificate: %w", err)
		}
		if made {
			log.Info("WARNING: no serving certificate in the cert dir; made a CA and a certificate there, which no API server trusts until a caBundle names that CA. "+
				"Mount one (cert-manager), or pass --webhook-self-signed to have the host keep one in a Secret and set the caBundles",
				"certDir", opts.CertDir, "ca", filepath.Join(opts.CertDir, "ca.crt"))
		}
	}

	var tlsOpts []func(*tls.Config)
	if !opts.EnableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	server := webhookserver.New(webhookserver.Options{
		Host:              opts.Host,
		Port:              opts.Port,
		CertDir:           opts.CertDir,
		CertName:          opts.CertName,
		KeyName:           opts.KeyName,
		TLSOpts:           tlsOpts,
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		ReadTimeout:       opts.ReadTimeout,
		MaxBytesInFlight:  opts.MaxBytesInFlight,
		BudgetHint:        "raise --webhook-max-bytes-in-flight",
	})
	paths := admission.Register(server.WithLimit(webhookserver.BodyLimit{Bytes: admission.MaxRequestBytes}), sc, desc.Webhooks, admission.Options{
		SidecarName:    desc.Name,
		SidecarAddress: sc.Address(),
		Timeout:        opts.AdmissionTimeout,
	})
	if len(desc.Conversions) > 0 {
		server.Register(conversion.Path, conversion.NewHandler(sc, desc.Conversions, conversion.Options{
			SidecarName:     desc.Name,
			SidecarAddress:  sc.Address(),
			Timeout:         opts.ConversionTimeout,
			MaxRequestBytes: opts.ConversionMaxRequestBytes,
		}), webhookserver.BodyLimit{Bytes: opts.ConversionMaxRequestBytes, Hint: "raise --conversion-max-request-bytes"})
		paths = append(paths, conversion.Path)
	}
	if err := mgr.Add(server); err != nil {
		return err
	}
	probes.addReadyz("webhook-server", server.StartedChecker(), true)
	log.Info("Serving the sidecar's webhooks", "port", opts.Port, "paths", paths, "selfSigned", opts.SelfSigned, "http2", opts.EnableHTTP2)
	return nil
}

// validateBounds checks that the budget of bytes in flight holds the largest
// request, which would otherwise wait for a budget it cannot get.
func (o WebhookOptions) validateBounds() error {
	largest, what := int64(admission.MaxRequestBytes), "7 MiB, the largest AdmissionReview"
	if o.ConversionMaxRequestBytes > largest {
		largest, what = o.ConversionMaxRequestBytes, "--conversion-max-request-bytes"
	}
	if o.MaxBytesInFlight < largest {
		return fmt.Errorf("--webhook-max-bytes-in-flight (%d) is below %s (%d): the webhook server could never hold such a request; raise --webhook-max-bytes-in-flight",
			o.MaxBytesInFlight, what, largest)
	}
	return nil
}

// withDefaults fills in every option left unset; the Service is the one the
// resolved description names.
func (o WebhookOptions) withDefaults(res *description.Resolved) WebhookOptions {
	sidecarName := res.Name
	d := DefaultWebhookOptions()
	if o.ConversionMaxRequestBytes <= 0 {
		o.ConversionMaxRequestBytes = d.ConversionMaxRequestBytes
	}
	if o.MaxBytesInFlight <= 0 {
		o.MaxBytesInFlight = d.MaxBytesInFlight
	}
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = d.ReadTimeout
	}
	if o.CertDir == "" {
		o.CertDir = d.CertDir
	}
	if o.CertName == "" {
		o.CertName = d.CertName
	}
	if o.KeyName == "" {
		o.KeyName = d.KeyName
	}
	o.ServiceName, o.ServiceNamespace = res.Service.Name, res.Service.Namespace
	if o.CertSecret == "" {
		o.CertSecret = sidecarName + "-webhook-cert"
	}
	if o.ConfigurationName == "" {
		o.ConfigurationName = sidecarName
	}
	return o
}

// directClient is a client that reads from the API server, not a cache, for
// the few objects the certificates concern.
func directClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
