package hostcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/manifests"
)

// runWebhooks prints the webhook configurations and CRD conversion stanzas
// that match what the sidecar declares.
func runWebhooks(args []string) error {
	fs := flag.NewFlagSet("host webhooks", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: host webhooks [flags]

Prints, as YAML, the MutatingWebhookConfiguration and ValidatingWebhookConfiguration
that send the API server's admission calls to the host's endpoints for what the
sidecar declares, and for every kind it converts a partial CustomResourceDefinition
holding the conversion stanza, to merge into the CRD (a kustomize patch, or
kubectl patch crd NAME --type merge --patch-file FILE, or kubectl apply of the
whole output).

Flags:`)
		fs.PrintDefaults()
	}
	var src descriptionSource
	src.bindFlags(fs)
	var opts manifests.WebhookOptions
	var selector, caFile string
	var service description.ResolveOptions
	var port int
	fs.StringVar(&opts.Name, "name", "", "The name of the webhook configurations (default: the sidecar's name, as the host's --webhook-configuration-name).")
	fs.StringVar(&service.ServiceName, "service-name", "", `The Service in front of the host's webhook server (default "<sidecar name>-webhook", as the host's --webhook-service-name).`)
	fs.StringVar(&service.ServiceNamespace, "service-namespace", "", `The namespace of that Service (default: $POD_NAMESPACE, else the service account's namespace, else "default", as the host's --webhook-service-namespace).`)
	fs.IntVar(&port, "service-port", 443, "The port of that Service.")
	fs.StringVar(&opts.URL, "url", "", "The webhook server's base URL, such as https://127.0.0.1:9443, instead of a Service (for a host outside the cluster).")
	fs.StringVar(&opts.FailurePolicy, "failure-policy", "", "Fail or Ignore for every webhook (default: as each webhook declares).")
	fs.StringVar(&selector, "namespace-selector", "", `A label selector limiting the webhooks to some namespaces, e.g. "kubernetes.io/metadata.name notin (kube-system)".`)
	fs.StringVar(&caFile, "ca-bundle-file", "", "A PEM file whose CA bundle the API server verifies the webhook server with (default: none; set by the host's --webhook-self-signed or cert-manager).")
	fs.StringVar(&opts.InjectCAFrom, "inject-ca-from", "", "A cert-manager Certificate, as <namespace>/<name>, whose CA cert-manager injects.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("host webhooks: unexpected arguments %q", fs.Args())
	}
	if port < 1 || port > 65535 {
		return fmt.Errorf("host webhooks: --service-port %d is not a port", port)
	}
	opts.ServicePort = int32(port)
	if selector != "" {
		sel, err := metav1.ParseToLabelSelector(selector)
		if err != nil {
			return fmt.Errorf("host webhooks: --namespace-selector: %w", err)
		}
		opts.NamespaceSelector = sel
	}
	if caFile != "" {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return fmt.Errorf("host webhooks: --ca-bundle-file: %w", err)
		}
		opts.CABundle = ca
	}

	_, desc, err := src.load(context.Background())
	if err != nil {
		return err
	}
	if len(desc.Webhooks) == 0 && len(desc.Conversions) == 0 {
		return errors.New("host webhooks: the sidecar declares no webhooks and no conversions")
	}
	// Resources are guessed from the kinds, or as the webhooks declare them.
	res, err := description.Resolve(description.GuessingMapper(desc), desc, service)
	if err != nil {
		return fmt.Errorf("host webhooks: %w", err)
	}
	objs, err := manifests.Webhooks(res, opts)
	if err != nil {
		return err
	}
	return manifests.WriteYAML(os.Stdout, objs)
}
