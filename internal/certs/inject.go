package certs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultInjectInterval is how often an Injector looks at what it patches.
const DefaultInjectInterval = 10 * time.Second

// Injector sets the caBundle of the webhook configurations and CRD conversion
// stanzas the host owns to the CA of its certificate, as cert-manager's CA
// injector does. It is a controller-runtime Runnable that runs on every
// replica (they share one CA): at start and then every Interval it renews the
// certificate if needed (through Provisioner) and patches whatever differs.
// What does not exist yet is skipped, and patched once it appears.
type Injector struct {
	// Client reads and patches the objects. Its scheme must know
	// admissionregistration.k8s.io/v1 and apiextensions.k8s.io/v1. Required.
	Client client.Client
	// Provisioner keeps the certificate; its CA is the caBundle. Required.
	Provisioner *Provisioner
	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations name
	// the webhook configurations whose every webhook gets the caBundle.
	MutatingWebhookConfigurations, ValidatingWebhookConfigurations []string
	// CRDs name the CustomResourceDefinitions whose conversion webhook gets
	// the caBundle (those whose conversion strategy is Webhook).
	CRDs []string
	// Interval is how often the Injector looks again. Defaults to
	// DefaultInjectInterval.
	Interval time.Duration
	// Log receives what the Injector does. Defaults to a discarding logger.
	Log logr.Logger
}

// NeedLeaderElection is false: every replica keeps its certificate fresh, and
// patches are idempotent.
func (i *Injector) NeedLeaderElection() bool { return false }

// Start injects until ctx is done.
func (i *Injector) Start(ctx context.Context) error {
	interval := i.Interval
	if interval <= 0 {
		interval = DefaultInjectInterval
	}
	log := i.log()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := i.InjectOnce(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Keeping the webhook CA bundle up to date; retrying", "in", interval.String())
		}
	}, interval)
	return nil
}

// InjectOnce renews the certificate if needed and patches every object whose
// caBundle differs from the CA.
func (i *Injector) InjectOnce(ctx context.Context) error {
	ca, err := i.Provisioner.Ensure(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range i.MutatingWebhookConfigurations {
		errs = append(errs, i.patch(ctx, "MutatingWebhookConfiguration", &admissionregistrationv1.MutatingWebhookConfiguration{}, name, func(obj client.Object) bool {
			changed := false
			for j := range obj.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks {
				changed = setBundle(&obj.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks[j].ClientConfig.CABundle, ca) || changed
			}
			return changed
		}))
	}
	for _, name := range i.ValidatingWebhookConfigurations {
		errs = append(errs, i.patch(ctx, "ValidatingWebhookConfiguration", &admissionregistrationv1.ValidatingWebhookConfiguration{}, name, func(obj client.Object) bool {
			changed := false
			for j := range obj.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks {
				changed = setBundle(&obj.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks[j].ClientConfig.CABundle, ca) || changed
			}
			return changed
		}))
	}
	for _, name := range i.CRDs {
		errs = append(errs, i.patch(ctx, "CustomResourceDefinition", &apiextensionsv1.CustomResourceDefinition{}, name, func(obj client.Object) bool {
			conv := obj.(*apiextensionsv1.CustomResourceDefinition).Spec.Conversion
			if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
				return false
			}
			return setBundle(&conv.Webhook.ClientConfig.CABundle, ca)
		}))
	}
	return errors.Join(errs...)
}

// patch reads the named object, lets change set its caBundles, and patches
// it, with an optimistic lock, when change reports a change.
func (i *Injector) patch(ctx context.Context, kind string, obj client.Object, name string, change func(client.Object) bool) error {
	if err := i.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	orig := obj.DeepCopyObject().(client.Object)
	if !change(obj) {
		return nil
	}
	if err := i.Client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return nil // changed meanwhile: the next round looks again
		}
		return fmt.Errorf("setting the caBundle of %s %s: %w", kind, name, err)
	}
	i.log().Info("Set the webhook CA bundle", "kind", kind, "name", name)
	return nil
}

func (i *Injector) log() logr.Logger {
	if i.Log.GetSink() == nil {
		return logr.Discard()
	}
	return i.Log
}

func setBundle(dst *[]byte, ca []byte) bool {
	if bytes.Equal(*dst, ca) {
		return false
	}
	*dst = bytes.Clone(ca)
	return true
}
