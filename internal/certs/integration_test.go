package certs_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/certs"
	"github.com/polyop/polyop/internal/testenv"
)

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env, err := testenv.Start(filepath.Join(testenv.RepoRoot(), "examples", "go", "maintenancewindow", "config", "crd"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	if k8s, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := "certs-" + rand.String(6)
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func provisioner(t *testing.T, ns string, hosts ...string) *certs.Provisioner {
	return &certs.Provisioner{
		Client: k8s,
		Secret: client.ObjectKey{Namespace: ns, Name: "webhook-cert"},
		Hosts:  hosts,
		Files:  certs.Files{Dir: t.TempDir()},
		Log:    testr.New(t),
	}
}

func TestProvisionerKeepsOneCertificateForEveryReplica(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t)
	first := provisioner(t, ns, "web.ops.svc")
	ca, err := first.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, first.Secret, secret); err != nil {
		t.Fatal(err)
	}
	if secret.Type != corev1.SecretTypeTLS || !bytes.Equal(secret.Data["ca.crt"], ca) || len(secret.Data["ca.key"]) == 0 {
		t.Fatalf("the Secret is %s with keys %v", secret.Type, secret.Data)
	}
	onDisk, _, err := first.Files.Read()
	if err != nil || !bytes.Equal(onDisk.Cert, secret.Data["tls.crt"]) || !bytes.Equal(onDisk.Key, secret.Data["tls.key"]) {
		t.Fatalf("the cert dir does not hold the Secret's pair: %v", err)
	}

	// Another replica adopts the same certificate.
	second := provisioner(t, ns, "web.ops.svc")
	ca2, err := second.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	onDisk2, _, _ := second.Files.Read()
	if !bytes.Equal(ca2, ca) || !bytes.Equal(onDisk2.Cert, onDisk.Cert) {
		t.Error("the second replica made a certificate of its own")
	}

	// New hosts renew the serving certificate under the same CA.
	third := provisioner(t, ns, "web.ops.svc", "127.0.0.1")
	ca3, err := third.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	onDisk3, _, _ := third.Files.Read()
	if !bytes.Equal(ca3, ca) || bytes.Equal(onDisk3.Cert, onDisk.Cert) {
		t.Error("new hosts did not renew the serving certificate under the same CA")
	}
	if p := certs.ServingCertProblem(certs.KeyPair{Cert: ca, Key: secret.Data["ca.key"]}, onDisk3, third.Hosts, time.Now(), certs.RenewBefore); p != "" {
		t.Errorf("the renewed certificate: %s", p)
	}

	// Close to expiry, it is renewed again.
	later := provisioner(t, ns, "web.ops.svc", "127.0.0.1")
	later.Now = func() time.Time { return time.Now().Add(350 * 24 * time.Hour) }
	if _, err := later.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	onDisk4, _, _ := later.Files.Read()
	if bytes.Equal(onDisk4.Cert, onDisk3.Cert) {
		t.Error("a certificate about to expire was not renewed")
	}
}

func TestInjectorSetsTheCABundles(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t)
	name := "inject-" + ns
	url := "https://127.0.0.1:9443/validate"
	none := admissionregistrationv1.SideEffectClassNone
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		}},
	}
	if err := k8s.Create(ctx, validating); err != nil {
		t.Fatal(err)
	}
	crdName := "maintenancewindows.examples.polyop.dev"
	convURL := "https://127.0.0.1:9443/convert"
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &convURL},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if err := k8s.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}

	injector := &certs.Injector{
		Client:                          k8s,
		Provisioner:                     provisioner(t, ns, "127.0.0.1"),
		MutatingWebhookConfigurations:   []string{name}, // absent: skipped
		ValidatingWebhookConfigurations: []string{name},
		CRDs:                            []string{crdName},
		Log:                             testr.New(t),
	}
	if err := injector.InjectOnce(ctx); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, injector.Provisioner.Secret, secret); err != nil {
		t.Fatal(err)
	}
	ca := secret.Data["ca.crt"]
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, validating); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(validating.Webhooks[0].ClientConfig.CABundle, ca) {
		t.Error("the ValidatingWebhookConfiguration has no caBundle")
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, ca) {
		t.Error("the CRD's conversion has no caBundle")
	}
	// Nothing left to change: a second pass patches nothing.
	rv := validating.ResourceVersion
	if err := injector.InjectOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, validating); err != nil || validating.ResourceVersion != rv {
		t.Errorf("a second pass changed the configuration (%v)", err)
	}
}
