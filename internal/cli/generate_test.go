package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/testenv"
)

// copyCRDs is a test-only Scaffolder: its GenerateCRDs copies CRD files
// into the project's config/crd/bases, as a language's generator writes
// them from the types.
type copyCRDs struct{ files []string }

func (copyCRDs) Defaults(p *scaffold.Project) error {
	p.Sidecar.Command = []string{"bin/sidecar"}
	return nil
}
func (copyCRDs) Init(*scaffold.Writer, *scaffold.Project) error                          { return nil }
func (copyCRDs) Tasks(*scaffold.Project) scaffold.Tasks                                  { return scaffold.Tasks{} }
func (copyCRDs) CreateAPI(*scaffold.Writer, *scaffold.Project, *scaffold.Resource) error { return nil }
func (copyCRDs) CreateWebhook(*scaffold.Writer, *scaffold.Project, *scaffold.Resource) error {
	return nil
}

func (c copyCRDs) GenerateCRDs(_ context.Context, _ *scaffold.Project, root string, log io.Writer) error {
	dir := filepath.Join(root, filepath.FromSlash(scaffold.CRDDir))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range c.files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// useScaffolder makes s the Go scaffolder for the test, and puts back the
// one registered before.
func useScaffolder(t *testing.T, s scaffold.Scaffolder) {
	t.Helper()
	if old, err := scaffold.For(scaffold.Go); err == nil {
		t.Cleanup(func() { scaffold.Register(scaffold.Go, old) })
	}
	scaffold.Register(scaffold.Go, s)
}

// exampleProject makes a project named name whose sidecar is the example
// examples/go/<example> of this repository (built with go build, as the
// PROJECT file's sidecar.build says) and whose kind is res, with the
// example's CRDs.
func exampleProject(t *testing.T, name, example string, res ...scaffold.Resource) string {
	t.Helper()
	repo := testenv.RepoRoot()
	useScaffolder(t, copyCRDs{files: globCRDs(t, filepath.Join(repo, "config", "overlays", "go-"+example, "generated", "crd"))})
	root := filepath.Join(t.TempDir(), name)
	if _, err := scaffold.Init(scaffold.InitOptions{Dir: root, Name: name, Language: scaffold.Go, Domain: "polyop.dev", Version: "1.2.3"}); err != nil {
		t.Fatalf("init: %v", err)
	}
	p, _, err := scaffold.LoadProject(root)
	if err != nil {
		t.Fatal(err)
	}
	p.Sidecar = scaffold.SidecarCommands{
		Build:   []string{"go", "build", "-C", repo, "-o", filepath.Join(root, "bin", "sidecar"), "./examples/go/" + example},
		Command: []string{"bin/sidecar"},
	}
	p.Resources = res
	if err := p.Save(root); err != nil {
		t.Fatal(err)
	}
	return root
}

func globCRDs(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	return files
}

func TestGenerateWritesTheHostsRBACAndTheWebhookManifestsFromTheSidecarsDescription(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two example sidecars and starts a control plane")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	// cert-manager's kinds, so that the API server takes
	// config/default-certmanager's Issuer and Certificate too.
	kubectl(t, env, "", strings.NewReader(certManagerCRDs), "apply", "-f", "-")
	kubectl(t, env, "", nil, "wait", "--for=condition=Established", "--timeout=2m",
		"crd/issuers.cert-manager.io", "crd/certificates.cert-manager.io")

	mw := scaffold.Resource{Group: "examples", Domain: "polyop.dev", Version: "v1", Kind: "MaintenanceWindow", Plural: "maintenancewindows", Namespaced: true, API: true, Controller: true,
		Webhooks: &scaffold.Webhooks{Defaulting: true, Validation: true, Conversion: true}}
	mwBeta := mw
	mwBeta.Version, mwBeta.Controller = "v1beta1", false
	site := scaffold.Resource{Group: "examples", Domain: "polyop.dev", Version: "v1", Kind: "Website", Plural: "websites", Namespaced: true, API: true, Controller: true}

	for _, tc := range []struct {
		name, project, example string
		resources              []scaffold.Resource
		// role and webhooks are what role.yaml and manifests.yaml must say.
		role, webhooks []string
		conversion     bool
	}{
		{
			name: "a sidecar with a controller, webhooks and a conversion", project: "windows", example: "maintenancewindow",
			resources: []scaffold.Resource{mw, mwBeta},
			role: []string{"- maintenancewindows\n  verbs:\n  - get\n  - list\n  - watch", "- maintenancewindows/status\n  verbs:\n  - get\n  - update\n  - patch",
				"- tokenreviews", "name: manager-role-leader-election"},
			webhooks: []string{"kind: MutatingWebhookConfiguration", "kind: ValidatingWebhookConfiguration",
				"name: mmaintenancewindow-v1.examples.polyop.dev", "name: webhook\n      namespace: system\n      path: /mutate-examples-polyop-dev-v1-maintenancewindow"},
			conversion: true,
		},
		{
			name: "a sidecar that owns children and declares no webhooks", project: "sites", example: "website",
			resources: []scaffold.Resource{site},
			role: []string{"- websites\n  verbs:\n  - get\n  - list\n  - watch", "- websites/finalizers\n  verbs:\n  - update",
				"- deployments\n  verbs:\n  - get\n  - list\n  - watch\n  - create\n  - update\n  - patch\n  - delete",
				"- configmaps\n  - services\n  verbs:\n  - get\n  - list\n  - watch\n  - create\n  - update\n  - patch\n  - delete"},
			webhooks: []string{"declares no admission webhooks"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := exampleProject(t, tc.project, tc.example, tc.resources...)
			var out, errOut bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := Generate(ctx, GenerateOptions{Dir: root, StartTimeout: 2 * time.Minute}, &out, &errOut); err != nil {
				t.Fatalf("generate: %v\n%s", err, errOut.String())
			}
			for _, f := range []string{scaffold.CRDKustomization, scaffold.RoleFile, scaffold.WebhooksFile, scaffold.WebhookKustomization} {
				if !strings.Contains(out.String(), "wrote "+f+"\n") {
					t.Errorf("generate did not print that it wrote %s:\n%s", f, out.String())
				}
			}
			role := readFile(t, root, scaffold.RoleFile)
			for _, want := range tc.role {
				if !strings.Contains(role, want) {
					t.Errorf("%s has no %q:\n%s", scaffold.RoleFile, want, role)
				}
			}
			webhooks := readFile(t, root, scaffold.WebhooksFile)
			for _, want := range tc.webhooks {
				if !strings.Contains(webhooks, want) {
					t.Errorf("%s has no %q:\n%s", scaffold.WebhooksFile, want, webhooks)
				}
			}
			crds := readFile(t, root, scaffold.CRDKustomization)
			if !strings.Contains(crds, "- bases/examples.polyop.dev_"+tc.resources[0].Plural+".yaml") {
				t.Errorf("%s does not list the CRD:\n%s", scaffold.CRDKustomization, crds)
			}
			_, err := os.Stat(filepath.Join(root, filepath.FromSlash(scaffold.ConversionFile)))
			if tc.conversion != (err == nil) {
				t.Errorf("%s exists: %v, want %v", scaffold.ConversionFile, err == nil, tc.conversion)
			}

			rendered := kubectl(t, env, root, nil, "kustomize", "config/default")
			for _, want := range []string{"image: ghcr.io/polyop/polyop-host:1.2.3", "image: " + tc.project + "-sidecar:latest"} {
				if !strings.Contains(rendered, want) {
					t.Errorf("config/default renders no %q", want)
				}
			}
			if tc.conversion {
				for _, want := range []string{"strategy: Webhook", "name: " + tc.project + "-webhook\n          namespace: " + tc.project + "-system\n          path: /convert",
					"resourceNames:\n  - maintenancewindows.examples.polyop.dev"} {
					if !strings.Contains(rendered, want) {
						t.Errorf("config/default renders no %q:\n%s", want, rendered)
					}
				}
				cm := kubectl(t, env, root, nil, "kustomize", "config/default-certmanager")
				if want := "cert-manager.io/inject-ca-from: " + tc.project + "-system/" + tc.project + "-serving-cert"; strings.Count(cm, want) != 3 {
					t.Errorf("config/default-certmanager has %d %q, want 3 (two webhook configurations, one CRD):\n%s", strings.Count(cm, want), want, cm)
				}
			}
			// The API server accepts every object each entry makes, once
			// its namespace exists (a dry run creates nothing).
			kubectl(t, env, root, nil, "create", "namespace", tc.project+"-system")
			kubectl(t, env, root, strings.NewReader(rendered), "apply", "--dry-run=server", "-f", "-")
			certManager := kubectl(t, env, root, nil, "kustomize", "config/default-certmanager")
			kubectl(t, env, root, strings.NewReader(certManager), "apply", "--dry-run=server", "-f", "-")
		})
	}
}

func TestGenerateSaysWhichSidecarCommandFailedAndWhatItPrinted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sidecar scaffold.SidecarCommands
		want    []string
	}{
		{
			name:    "the build fails",
			sidecar: scaffold.SidecarCommands{Build: []string{"sh", "-c", "echo 'main.go:3: undefined: x' >&2; exit 1"}, Command: []string{"true"}},
			want:    []string{"building the sidecar", "sh -c", "sidecar.build", "main.go:3: undefined: x"},
		},
		{
			name:    "the sidecar exits",
			sidecar: scaffold.SidecarCommands{Command: []string{"sh", "-c", "echo 'no module named widgets' >&2; exit 3"}},
			want:    []string{"exited before it served", "sh -c", "exit status 3", "no module named widgets"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			useScaffolder(t, copyCRDs{})
			root := t.TempDir()
			if _, err := scaffold.Init(scaffold.InitOptions{Dir: root, Name: "broken", Language: scaffold.Go, Domain: "example.com", Version: "1.2.3"}); err != nil {
				t.Fatal(err)
			}
			p, _, err := scaffold.LoadProject(root)
			if err != nil {
				t.Fatal(err)
			}
			p.Sidecar = tc.sidecar
			if err := p.Save(root); err != nil {
				t.Fatal(err)
			}
			err = Generate(context.Background(), GenerateOptions{Dir: root, StartTimeout: time.Minute}, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("generate succeeded")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
		})
	}
}

func kubectl(t *testing.T, env *testenv.Env, dir string, stdin io.Reader, args ...string) string {
	t.Helper()
	cmd := exec.Command(env.Kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	if args[0] == "kustomize" {
		cmd = exec.Command(env.Kubectl, args...)
	}
	cmd.Dir, cmd.Stdin = dir, stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, errOut.String(), out.String())
	}
	return out.String()
}

func readFile(t *testing.T, root, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// certManagerCRDs are cert-manager's Issuer and Certificate, with their
// schemas left open: enough for the API server to take the objects of
// config/default-certmanager.
const certManagerCRDs = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: issuers.cert-manager.io
spec:
  group: cert-manager.io
  names: {kind: Issuer, listKind: IssuerList, plural: issuers, singular: issuer}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  names: {kind: Certificate, listKind: CertificateList, plural: certificates, singular: certificate}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
