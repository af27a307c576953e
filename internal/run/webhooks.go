package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/certs"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/manifests"
)

// webhookConfigurationSuffix ends the name of the webhook configurations
// polyop run applies, so that they never replace (nor, when it stops,
// delete) those of the operator deployed in the same cluster.
const webhookConfigurationSuffix = "-polyop-run"

// localWebhooks wire the sidecar's webhooks and conversions to a host on
// this machine: a CA and a serving certificate for 127.0.0.1, the host's
// webhook server on a free local port, and the configurations and CRD
// conversion stanzas pointing at it.
type localWebhooks struct {
	res     *description.Resolved
	certDir string
	port    int
	url     string
	ca      []byte

	// applied are the webhook configurations applied, to delete.
	applied []client.Object
	// conversions are the CRDs whose conversion was set, with the conversion
	// they had before, to restore.
	conversions map[string]*apiextensionsv1.CustomResourceConversion
}

// newLocalWebhooks makes the certificates in dir/certs and picks the port.
func newLocalWebhooks(res *description.Resolved, dir string) (*localWebhooks, error) {
	address, err := freeLocalAddress()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(address)
	w := &localWebhooks{res: res, certDir: filepath.Join(dir, "certs"), url: "https://" + address, conversions: map[string]*apiextensionsv1.CustomResourceConversion{}}
	if w.port, err = strconv.Atoi(port); err != nil {
		return nil, err
	}
	ca, err := certs.NewCA("polyop-run-webhook-ca", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	serving, err := certs.NewServingCert(ca, []string{"127.0.0.1", "localhost"}, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := (certs.Files{Dir: w.certDir}).Write(serving, ca.Cert); err != nil {
		return nil, err
	}
	w.ca = ca.Cert
	return w, nil
}

// hostArgs serve the webhooks on 127.0.0.1 with the certificate.
func (w *localWebhooks) hostArgs() []string {
	return []string{
		"--webhook-host", "127.0.0.1",
		"--webhook-port", strconv.Itoa(w.port),
		"--webhook-cert-dir", w.certDir,
	}
}

func (w *localWebhooks) caFile() string { return filepath.Join(w.certDir, "ca.crt") }

// install applies the webhook configurations and sets the CRDs' conversion,
// once the host serves them.
func (w *localWebhooks) install(ctx context.Context, c client.Client, con *console) error {
	objs, err := manifests.Webhooks(w.res, manifests.WebhookOptions{
		Name:     w.res.Name + webhookConfigurationSuffix,
		URL:      w.url,
		CABundle: w.ca,
	})
	if err != nil {
		return err
	}
	for _, obj := range objs {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: content}
		if u.GetKind() == "CustomResourceDefinition" {
			if err := w.setConversion(ctx, c, u, con); err != nil {
				return err
			}
			continue
		}
		con.printf("applying %s %s (to %s)", u.GetKind(), u.GetName(), w.url)
		w.applied = append(w.applied, u)
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// setConversion merges patch's conversion stanza into its CRD, remembering
// the conversion it had.
func (w *localWebhooks) setConversion(ctx context.Context, c client.Client, patch *unstructured.Unstructured, con *console) error {
	name := patch.GetName()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return fmt.Errorf("reading CustomResourceDefinition %s to set its conversion: %w", name, err)
	}
	w.conversions[name] = crd.Spec.Conversion
	con.printf("setting the conversion of CustomResourceDefinition %s (to %s)", name, w.url)
	if err := mergePatch(ctx, c, name, map[string]any{"spec": patch.Object["spec"]}); err != nil {
		return fmt.Errorf("setting the conversion of CustomResourceDefinition %s: %w", name, err)
	}
	return nil
}

// uninstall deletes the webhook configurations, then gives the CRDs their
// conversion back. It goes on after an error, and reports them all.
func (w *localWebhooks) uninstall(c client.Client, con *console) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, obj := range w.applied {
		err := c.Delete(ctx, obj)
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s %s (delete it with kubectl, or its failure policy may refuse writes): %w",
				obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err))
			continue
		}
		con.printf("deleted %s %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	}
	for name, old := range w.conversions {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			crd.Spec.Conversion = old
			if old == nil {
				crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
			}
			return c.Update(ctx, crd)
		})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("restoring the conversion of CustomResourceDefinition %s: %w", name, err))
			continue
		}
		con.printf("restored the conversion of CustomResourceDefinition %s", name)
	}
	return errors.Join(errs...)
}

// mergePatch applies a JSON merge patch to the CRD name.
func mergePatch(ctx context.Context, c client.Client, name string, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = name
	return c.Patch(ctx, crd, client.RawPatch(types.MergePatchType, data))
}
