package deploy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// TestHostRunsWithTheDeployedRBAC runs each overlay's pod here, as the
// kubelet would run it, against the API server the overlay was applied to:
// the init container copies the probe; the sidecar runs with its container's
// arguments and environment; the host runs with its container's arguments
// (ports and volumes mapped to this machine) as the Deployment's
// ServiceAccount, so with the overlay's RBAC alone. Then the host must become
// ready, the sidecar's probe pass, the sample objects get their status and go
// when deleted (finalizers and all), events be recorded,
// a scrape with a token bound to the metrics-reader role succeed, and,
// self-signed, the host keep its certificate and set the caBundle of its
// webhook configurations and CRDs. The host's log must show no request the
// RBAC forbade.
func TestHostRunsWithTheDeployedRBAC(t *testing.T) {
	all := overlays(t)
	for _, o := range all {
		t.Run(o.name, func(t *testing.T) {
			ex := exampleOf(t, o)
			objs := render(t, o.dir)
			dep := deployment(t, objs)
			pod := &dep.Spec.Template.Spec
			host, sidecar, install := container(t, pod, "host"), container(t, pod, "sidecar"), container(t, pod, "install-probe")
			ns, sa := dep.Namespace, pod.ServiceAccountName
			hostArgs := expandEnv(host, host.Args)
			_, selfSigned := flagValue(hostArgs, "webhook-self-signed")

			// The overlays share a namespace and cluster-wide names: start
			// from this overlay's RBAC alone.
			deleteRBAC(t, all)
			apply(t, objs, func(u *unstructured.Unstructured) applyMode {
				if selfSigned && defaultMode(u) == dryRun {
					return create // created harmless below, for the host to set their caBundle
				}
				return defaultMode(u)
			})
			if selfSigned {
				neutralizeWebhooks(t, objs)
			}

			dirs := newPodDirs(t, pod)
			// The init container.
			if out, err := exec.Command(probeBin, dirs.localAll(install.Command[1:])...).CombinedOutput(); err != nil {
				t.Fatalf("install-probe: %v\n%s", err, out)
			}
			sidecarProc := startSidecar(t, ex, sidecar, dirs)

			healthPort, metricsPort, webhookPort := freePort(t), freePort(t), freePort(t)
			args := append(dirs.localAll(hostArgs),
				"--kubeconfig="+serviceAccountKubeconfig(t, ns, sa),
				"--health-probe-bind-address="+fmt.Sprintf("127.0.0.1:%d", healthPort),
				"--leader-election-namespace="+ns, // in a pod, the host reads it from its ServiceAccount
				"--zap-log-level=debug",
			)
			if _, ok := flagValue(hostArgs, "metrics-bind-address"); ok {
				args = append(args, fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort))
			}
			if portNumber(host, intstr.FromString("webhook-server")) > 0 {
				args = append(args, fmt.Sprintf("--webhook-port=%d", webhookPort))
				if _, ok := flagValue(hostArgs, "webhook-cert-dir"); !ok {
					args = append(args, "--webhook-cert-dir="+dirs.local(defaultCertDir))
				}
			}
			hostProc, err := startWithEnv(t, "host", host, dirs, append([]string{hostBin}, args...), "POD_NAMESPACE="+ns)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(hostProc.Stop)
			t.Cleanup(func() {
				if out := hostProc.Output(); strings.Contains(out, "forbidden") {
					t.Errorf("the host was forbidden something; its RBAC lacks it:\n%s", forbiddenLines(out))
				}
			})

			// The kubelet's probes.
			testenv.Eventually(t, 3*time.Minute, "the host's readiness probe", func(ctx context.Context) error {
				if hostProc.Exited() {
					return fmt.Errorf("the host exited")
				}
				return httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d%s", healthPort, host.ReadinessProbe.HTTPGet.Path), "")
			})
			// The kubelet probes again and again: one probe that a busy
			// machine made miss its own timeout does not fail the pod.
			probe := dirs.localAll(sidecar.ReadinessProbe.Exec.Command)
			testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("the sidecar's readiness probe %q", probe), func(ctx context.Context) error {
				if out, err := exec.CommandContext(ctx, probe[0], probe[1:]...).CombinedOutput(); err != nil {
					return fmt.Errorf("%w\n%s", err, out)
				}
				return nil
			})

			// The sample objects get a status and events.
			testNS := "run-" + rand.String(6)
			if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}); err != nil {
				t.Fatal(err)
			}
			reconciled := map[string]bool{} // the kinds of the overlay's CRDs
			for _, crd := range find(objs, "CustomResourceDefinition") {
				reconciled[nested(crd, "spec", "group")+"/"+nested(crd, "spec", "names", "kind")] = true
			}
			for _, sample := range samples(t, ex) {
				sample.SetNamespace(testNS)
				if err := k8s.Create(context.Background(), sample); err != nil {
					t.Fatalf("creating the sample %s %s: %v", sample.GetKind(), sample.GetName(), err)
				}
				if !reconciled[sample.GroupVersionKind().Group+"/"+sample.GetKind()] {
					continue // an object the sample needs, such as a ConfigMap
				}
				testenv.Eventually(t, 2*time.Minute, "the sample "+sample.GetName()+"'s status", func(ctx context.Context) error {
					got := &unstructured.Unstructured{}
					got.SetGroupVersionKind(sample.GroupVersionKind())
					if err := k8s.Get(ctx, client.ObjectKeyFromObject(sample), got); err != nil {
						return err
					}
					if status, _, _ := unstructured.NestedMap(got.Object, "status"); len(status) == 0 {
						return fmt.Errorf("no status yet")
					}
					if ex.finalizes && len(got.GetFinalizers()) == 0 {
						return fmt.Errorf("no finalizer yet")
					}
					return nil
				})
			}
			// Deleting them runs the finalizers, the host's and the sidecar's.
			for _, sample := range samples(t, ex) {
				if !reconciled[sample.GroupVersionKind().Group+"/"+sample.GetKind()] {
					continue
				}
				sample.SetNamespace(testNS)
				if err := k8s.Delete(context.Background(), sample); err != nil {
					t.Fatalf("deleting the sample %s: %v", sample.GetName(), err)
				}
				testenv.Eventually(t, 2*time.Minute, "the sample "+sample.GetName()+" gone", func(ctx context.Context) error {
					err := k8s.Get(ctx, client.ObjectKeyFromObject(sample), sample.DeepCopy())
					if apierrors.IsNotFound(err) {
						return nil
					}
					return fmt.Errorf("still there: %w", err)
				})
			}
			testenv.Eventually(t, time.Minute, "an event recorded by the host", func(ctx context.Context) error {
				events := &unstructured.UnstructuredList{}
				events.SetAPIVersion("events.k8s.io/v1")
				events.SetKind("EventList")
				if err := k8s.List(ctx, events, client.InNamespace(testNS)); err != nil {
					return err
				}
				if len(events.Items) == 0 {
					return fmt.Errorf("no events in %s", testNS)
				}
				return nil
			})

			if _, ok := flagValue(hostArgs, "metrics-bind-address"); ok {
				scrape(t, objs, ns, metricsPort)
			}
			if selfSigned {
				checkSelfSigned(t, objs, ns, hostArgs)
			}
			if sidecarProc.Exited() {
				t.Errorf("the sidecar exited:\n%s", sidecarProc.Output())
			}
		})
	}
}

// deleteRBAC deletes the RBAC objects every overlay renders.
func deleteRBAC(t *testing.T, all []overlay) {
	t.Helper()
	ctx := context.Background()
	for _, o := range all {
		for _, u := range render(t, o.dir) {
			switch u.GetKind() {
			case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
				if err := k8s.Delete(ctx, u.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
		}
	}
}

// neutralizeWebhooks points the webhook configurations at no namespace, so
// that the API server never calls the Service, which nothing serves in
// envtest, while the host still finds them to set their caBundle.
func neutralizeWebhooks(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	never := &metav1.LabelSelector{MatchLabels: map[string]string{"polyop.dev/deploy-test": "never"}}
	for _, u := range find(objs, "MutatingWebhookConfiguration") {
		c := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: u.GetName()}, c); err != nil {
			t.Fatal(err)
		}
		for i := range c.Webhooks {
			c.Webhooks[i].NamespaceSelector = never
		}
		if err := k8s.Update(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range find(objs, "ValidatingWebhookConfiguration") {
		c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: u.GetName()}, c); err != nil {
			t.Fatal(err)
		}
		for i := range c.Webhooks {
			c.Webhooks[i].NamespaceSelector = never
		}
		if err := k8s.Update(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig that acts as the
// ServiceAccount namespace/name, through impersonation by the admin.
func serviceAccountKubeconfig(t *testing.T, namespace, name string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = "system:serviceaccount:" + namespace + ":" + name
		auth.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// samples reads the example's sample objects.
func samples(t *testing.T, ex example) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(repo(ex.samples, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples in %s: %v", ex.samples, err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o, err := decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		objs = append(objs, o...)
	}
	return objs
}

func httpGet(ctx context.Context, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the host's own self-signed metrics certificate
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// scrape scrapes the host's metrics as Prometheus would: with the token of a
// ServiceAccount bound to the rendered metrics-reader ClusterRole. The host
// authenticates and authorizes it through the API server, with its own RBAC.
func scrape(t *testing.T, objs []*unstructured.Unstructured, namespace string, port int) {
	t.Helper()
	ctx := context.Background()
	var reader string
	for _, u := range find(objs, "ClusterRole") {
		if strings.HasSuffix(u.GetName(), "metrics-reader") {
			reader = u.GetName()
		}
	}
	if reader == "" {
		t.Fatal("no metrics-reader ClusterRole rendered")
	}
	scraper := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper-" + rand.String(5), Namespace: namespace}}
	if err := k8s.Create(ctx, scraper); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: scraper.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scraper.Name, Namespace: namespace}},
	}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding) })
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, scraper.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for the scraper: %v", err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	testenv.Eventually(t, time.Minute, "a scrape of the host's metrics", func(ctx context.Context) error {
		return httpGet(ctx, url, tok.Status.Token)
	})
	if err := httpGet(ctx, url, ""); err == nil {
		t.Errorf("the host's metrics answer a scrape without a token")
	}
}

// checkSelfSigned: the host keeps its certificate in the Secret its flags
// name, and sets the caBundle of its webhook configurations and converted
// CRDs.
func checkSelfSigned(t *testing.T, objs []*unstructured.Unstructured, namespace string, args []string) {
	t.Helper()
	secretName, _ := flagValue(args, "webhook-cert-secret")
	testenv.Eventually(t, 2*time.Minute, "the host's CA in every webhook configuration and converted CRD", func(ctx context.Context) error {
		secret := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secretName}, secret); err != nil {
			return err
		}
		for _, u := range find(objs, "MutatingWebhookConfiguration") {
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := k8s.Get(ctx, client.ObjectKey{Name: u.GetName()}, c); err != nil {
				return err
			}
			for _, w := range c.Webhooks {
				if len(w.ClientConfig.CABundle) == 0 {
					return fmt.Errorf("%s: no caBundle", c.Name)
				}
			}
		}
		for _, u := range find(objs, "ValidatingWebhookConfiguration") {
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := k8s.Get(ctx, client.ObjectKey{Name: u.GetName()}, c); err != nil {
				return err
			}
			for _, w := range c.Webhooks {
				if len(w.ClientConfig.CABundle) == 0 {
					return fmt.Errorf("%s: no caBundle", c.Name)
				}
			}
		}
		for _, u := range convertedCRDs(t, objs) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := k8s.Get(ctx, client.ObjectKey{Name: u.GetName()}, crd); err != nil {
				return err
			}
			if c := crd.Spec.Conversion; c == nil || c.Webhook == nil || c.Webhook.ClientConfig == nil || len(c.Webhook.ClientConfig.CABundle) == 0 {
				return fmt.Errorf("CRD %s: no caBundle", crd.Name)
			}
		}
		return nil
	})
}

// forbiddenLines picks the lines of a log that say something was forbidden.
func forbiddenLines(out string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "forbidden") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
