package manifests

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/polyop/polyop/internal/conversion"
	"github.com/polyop/polyop/internal/description"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// CertManagerInjectAnnotation asks cert-manager's CA injector to fill in the
// caBundle from a Certificate, named "<namespace>/<name>".
const CertManagerInjectAnnotation = "cert-manager.io/inject-ca-from"

// WebhookOptions shape the webhook manifests.
type WebhookOptions struct {
	// Name names the MutatingWebhookConfiguration and the
	// ValidatingWebhookConfiguration. Defaults to the sidecar's name, as the
	// host's --webhook-configuration-name does.
	Name string
	// ServicePort is the port of the Service in front of the host's webhook
	// server, which the resolved description names. Defaults to 443.
	ServicePort int32
	// URL is the webhook server's base URL (for example
	// https://127.0.0.1:9443), used instead of a Service: for a host that runs
	// outside the cluster. Defaults to "": a Service.
	URL string
	// FailurePolicy overrides what every webhook declared: "Fail" or
	// "Ignore". Defaults to "": as declared.
	FailurePolicy string
	// NamespaceSelector limits the webhooks to the namespaces it selects.
	// Defaults to nil: every namespace.
	NamespaceSelector *metav1.LabelSelector
	// CABundle is the PEM CA bundle the API server verifies the webhook
	// server with. Defaults to none: filled in later, by the host
	// (--webhook-self-signed) or cert-manager (InjectCAFrom).
	CABundle []byte
	// InjectCAFrom adds cert-manager's inject-ca-from annotation, naming a
	// Certificate as "<namespace>/<name>". Defaults to "": none.
	InjectCAFrom string
}

func (o WebhookOptions) withDefaults(res *description.Resolved) WebhookOptions {
	if o.Name == "" {
		o.Name = res.Name
	}
	if o.ServicePort == 0 {
		o.ServicePort = 443
	}
	return o
}

func (o WebhookOptions) validate(svc description.Service) error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("name %q: %s", o.Name, strings.Join(msgs, "; ")))
	}
	switch o.FailurePolicy {
	case "", string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore):
	default:
		errs = append(errs, fmt.Errorf("failure policy %q: want Fail or Ignore", o.FailurePolicy))
	}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			errs = append(errs, fmt.Errorf("URL %q: want https://host[:port]", o.URL))
		}
	} else {
		if msgs := validation.IsDNS1123Label(svc.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("service name %q: %s", svc.Name, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsDNS1123Label(svc.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("service namespace %q: %s", svc.Namespace, strings.Join(msgs, "; ")))
		}
	}
	if o.InjectCAFrom != "" {
		if ns, name, ok := strings.Cut(o.InjectCAFrom, "/"); !ok || ns == "" || name == "" {
			errs = append(errs, fmt.Errorf("inject-ca-from %q: want <namespace>/<certificate>", o.InjectCAFrom))
		}
	}
	return errors.Join(errs...)
}

// Webhooks renders, for what res declares: a MutatingWebhookConfiguration
// with one webhook per kind that declares default, a
// ValidatingWebhookConfiguration with one per kind that declares validate,
// and for every converted kind a partial CustomResourceDefinition holding
// its conversion stanza. Each is left out when there is nothing to put in it.
// The webhooks call res.Service (or opts.URL); each webhook's resource and
// each CRD's name are the ones res resolved (through discovery, or
// description.GuessingMapper).
func Webhooks(res *description.Resolved, opts WebhookOptions) ([]runtime.Object, error) {
	opts = opts.withDefaults(res)
	if err := opts.validate(res.Service); err != nil {
		return nil, fmt.Errorf("webhook manifests: %w", err)
	}
	var objs []runtime.Object
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: opts.objectMeta(opts.Name),
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: opts.objectMeta(opts.Name),
	}
	for _, wh := range res.Webhooks {
		resource := wh.Resource
		failurePolicy := admissionregistrationv1.Fail
		if wh.FailurePolicy == polyopv1alpha1.FailurePolicy_FAILURE_POLICY_IGNORE {
			failurePolicy = admissionregistrationv1.Ignore
		}
		if opts.FailurePolicy != "" {
			failurePolicy = admissionregistrationv1.FailurePolicyType(opts.FailurePolicy)
		}
		sideEffects := admissionregistrationv1.SideEffectClassNone
		matchPolicy := admissionregistrationv1.Equivalent
		timeout := wh.TimeoutSeconds
		rule := func(ops []admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
			return []admissionregistrationv1.RuleWithOperations{{
				Operations: ops,
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{wh.GVK.Group},
					APIVersions: []string{wh.GVK.Version},
					Resources:   []string{resource},
				},
			}}
		}
		if ops := operations(wh.Operations, false); wh.Default && len(ops) > 0 {
			mutating.Webhooks = append(mutating.Webhooks, admissionregistrationv1.MutatingWebhook{
				Name:                    wh.MutateName(),
				ClientConfig:            opts.clientConfig(res.Service, wh.MutatePath()),
				Rules:                   rule(ops),
				FailurePolicy:           &failurePolicy,
				MatchPolicy:             &matchPolicy,
				NamespaceSelector:       opts.NamespaceSelector,
				SideEffects:             &sideEffects,
				TimeoutSeconds:          &timeout,
				AdmissionReviewVersions: []string{"v1"},
			})
		}
		if wh.Validate {
			validating.Webhooks = append(validating.Webhooks, admissionregistrationv1.ValidatingWebhook{
				Name:                    wh.ValidateName(),
				ClientConfig:            opts.clientConfig(res.Service, wh.ValidatePath()),
				Rules:                   rule(operations(wh.Operations, true)),
				FailurePolicy:           &failurePolicy,
				MatchPolicy:             &matchPolicy,
				NamespaceSelector:       opts.NamespaceSelector,
				SideEffects:             &sideEffects,
				TimeoutSeconds:          &timeout,
				AdmissionReviewVersions: []string{"v1"},
			})
		}
	}
	if len(mutating.Webhooks) > 0 {
		objs = append(objs, mutating)
	}
	if len(validating.Webhooks) > 0 {
		objs = append(objs, validating)
	}
	for _, crd := range res.CRDNames() {
		objs = append(objs, opts.conversionPatch(res.Service, crd))
	}
	return objs, nil
}

// operations turns declared operations into a rule's. A mutating webhook
// (all false) leaves out delete and connect: there is nothing to default.
func operations(ops []polyopv1alpha1.Operation, all bool) []admissionregistrationv1.OperationType {
	var out []admissionregistrationv1.OperationType
	for _, op := range ops {
		var t admissionregistrationv1.OperationType
		switch op {
		case polyopv1alpha1.Operation_OPERATION_CREATE:
			t = admissionregistrationv1.Create
		case polyopv1alpha1.Operation_OPERATION_UPDATE:
			t = admissionregistrationv1.Update
		case polyopv1alpha1.Operation_OPERATION_DELETE:
			if !all {
				continue
			}
			t = admissionregistrationv1.Delete
		case polyopv1alpha1.Operation_OPERATION_CONNECT:
			if !all {
				continue
			}
			t = admissionregistrationv1.Connect
		default:
			continue
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func (o WebhookOptions) objectMeta(name string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "polyop"}}
	if o.InjectCAFrom != "" {
		m.Annotations = map[string]string{CertManagerInjectAnnotation: o.InjectCAFrom}
	}
	return m
}

func (o WebhookOptions) clientConfig(svc description.Service, path string) admissionregistrationv1.WebhookClientConfig {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: o.CABundle}
	if o.URL != "" {
		u := strings.TrimSuffix(o.URL, "/") + path
		cc.URL = &u
		return cc
	}
	port := o.ServicePort
	cc.Service = &admissionregistrationv1.ServiceReference{Namespace: svc.Namespace, Name: svc.Name, Path: &path, Port: &port}
	return cc
}

// conversionPatch is the part of a CRD that sends its conversions to the
// host.
func (o WebhookOptions) conversionPatch(svc description.Service, crdName string) *unstructured.Unstructured {
	clientConfig := map[string]any{}
	if o.URL != "" {
		clientConfig["url"] = strings.TrimSuffix(o.URL, "/") + conversion.Path
	} else {
		clientConfig["service"] = map[string]any{
			"namespace": svc.Namespace,
			"name":      svc.Name,
			"path":      conversion.Path,
			"port":      int64(o.ServicePort),
		}
	}
	if len(o.CABundle) > 0 {
		clientConfig["caBundle"] = base64.StdEncoding.EncodeToString(o.CABundle)
	}
	metadata := map[string]any{"name": crdName}
	if o.InjectCAFrom != "" {
		metadata["annotations"] = map[string]any{CertManagerInjectAnnotation: o.InjectCAFrom}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   metadata,
		"spec": map[string]any{
			"conversion": map[string]any{
				"strategy": "Webhook",
				"webhook": map[string]any{
					"clientConfig":             clientConfig,
					"conversionReviewVersions": []any{"v1"},
				},
			},
		},
	}}
}

// WriteYAML writes objs as one YAML stream, documents separated by "---".
func WriteYAML(w io.Writer, objs []runtime.Object) error {
	for i, obj := range objs {
		var content map[string]any
		if u, ok := obj.(*unstructured.Unstructured); ok {
			content = u.Object
		} else {
			var err error
			if content, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
				return err
			}
		}
		if md, ok := content["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
			delete(md, "creationTimestamp")
		}
		data, err := yaml.Marshal(content)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}
