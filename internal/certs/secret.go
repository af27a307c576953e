package certs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The keys of the Secret a Provisioner keeps: those of a kubernetes.io/tls
// Secret, the CA's certificate as cert-manager names it, and the CA's key.
const (
	SecretCertKey   = corev1.TLSCertKey
	SecretKeyKey    = corev1.TLSPrivateKeyKey
	SecretCAKey     = "ca.crt"
	SecretCAKeyKey  = "ca.key"
	managedByLabel  = "app.kubernetes.io/managed-by"
	managedByPolyop = "polyop-host"
)

// Provisioner keeps a self-made CA and serving certificate in a Secret and in
// the cert dir.
type Provisioner struct {
	// Client reads and writes the Secret. Required.
	Client client.Client
	// Secret names the Secret. Required.
	Secret client.ObjectKey
	// Hosts are the DNS names and IP addresses the serving certificate
	// covers. Required.
	Hosts []string
	// Files is where the certificate is written for the webhook server.
	Files Files
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
	// Log receives what the Provisioner does. Defaults to a discarding logger.
	Log logr.Logger
}

// Ensure makes sure the Secret holds a valid CA and a serving certificate for
// the hosts that is not about to expire, making or renewing them as needed,
// and writes them to the cert dir. Several replicas may call it at once: the
// first to write the Secret wins and the others adopt what it wrote. It
// returns the CA certificate, for caBundles.
func (p *Provisioner) Ensure(ctx context.Context) ([]byte, error) {
	if p.Client == nil || p.Secret.Name == "" || p.Secret.Namespace == "" || len(p.Hosts) == 0 {
		return nil, errors.New("certs: the Provisioner needs a client, a Secret's namespace and name, and hosts")
	}
	log := p.Log
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ca, serving, err := p.ensureOnce(ctx, log)
		if err == nil {
			if err := p.Files.Write(serving, ca.Cert); err != nil {
				return nil, fmt.Errorf("writing the certificate to %s: %w", p.Files.Dir, err)
			}
			return ca.Cert, nil
		}
		// Another replica wrote the Secret first: read what it wrote.
		if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt < 5 {
			continue
		}
		return nil, fmt.Errorf("keeping the webhook certificate in Secret %s: %w", p.Secret, err)
	}
}

func (p *Provisioner) ensureOnce(ctx context.Context, log logr.Logger) (KeyPair, KeyPair, error) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	secret := &corev1.Secret{}
	err := p.Client.Get(ctx, p.Secret, secret)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return KeyPair{}, KeyPair{}, err
	}
	ca := KeyPair{Cert: secret.Data[SecretCAKey], Key: secret.Data[SecretCAKeyKey]}
	serving := KeyPair{Cert: secret.Data[SecretCertKey], Key: secret.Data[SecretKeyKey]}

	renewed := false
	if problem := CAProblem(ca, now()); problem != "" {
		if exists {
			log.Info("Making a new webhook CA", "secret", p.Secret.String(), "reason", problem)
		}
		if ca, err = NewCA(p.Secret.Name+"-ca", CAValidity); err != nil {
			return KeyPair{}, KeyPair{}, err
		}
		renewed = true
	}
	if problem := ServingCertProblem(ca, serving, p.Hosts, now(), RenewBefore); renewed || problem != "" {
		if exists && problem != "" {
			log.Info("Renewing the webhook serving certificate", "secret", p.Secret.String(), "reason", problem)
		}
		if serving, err = NewServingCert(ca, p.Hosts, ServingValidity); err != nil {
			return KeyPair{}, KeyPair{}, err
		}
		renewed = true
	}
	if !renewed {
		return ca, serving, nil
	}

	data := map[string][]byte{SecretCertKey: serving.Cert, SecretKeyKey: serving.Key, SecretCAKey: ca.Cert, SecretCAKeyKey: ca.Key}
	if !exists {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: p.Secret.Namespace,
				Name:      p.Secret.Name,
				Labels:    map[string]string{managedByLabel: managedByPolyop},
			},
			Type: corev1.SecretTypeTLS,
			Data: data,
		}
		if err := p.Client.Create(ctx, secret); err != nil {
			return KeyPair{}, KeyPair{}, err
		}
		log.Info("Made a webhook CA and serving certificate", "secret", p.Secret.String(), "hosts", p.Hosts)
		return ca, serving, nil
	}
	secret.Data = data
	if err := p.Client.Update(ctx, secret); err != nil {
		return KeyPair{}, KeyPair{}, err
	}
	log.Info("Updated the webhook certificate", "secret", p.Secret.String(), "hosts", p.Hosts)
	return ca, serving, nil
}
