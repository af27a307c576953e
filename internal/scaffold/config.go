package scaffold

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	polyopconfig "github.com/polyop/polyop/config"
)

// SampleMessage is the spec.message of every scaffolded sample: each
// language's scaffolded types have a spec.message, which the scaffolded
// reconciler copies into a ConfigMap.
const SampleMessage = "Hello from polyop"

// SampleName is the name of the sample object of r.
func SampleName(r *Resource) string { return strings.ToLower(r.Kind) + "-sample" }

// HostImageRepository is the image repository of the host that polyop
// deploys: the registry a release publishes the host image to (`make
// release-image` names it so; docs/releasing.md), so that a project's
// config/ pulls it as it stands.
const HostImageRepository = "ghcr.io/polyop/polyop-host"

// HostImage is the host image of polyop version: HostImageRepository at the
// version's tag. A project deploys the host of the polyop it was made with
// (Project.PolyopVersion).
func HostImage(version string) string { return HostImageRepository + ":" + version }

// SidecarImage is the image make docker-build tags a project's sidecar with
// unless IMG says otherwise, and the one its config/ entries deploy.
func SidecarImage(p *Project) string { return p.Name + "-sidecar:latest" }

// The config/ folders of a project, besides CRDDir and SamplesDir, relative
// to its root.
const (
	// BaseDir is polyop's kustomize base, copied from the polyop the project
	// was made with (the folders of polyop's own config/: default, manager,
	// rbac, webhook, certmanager, selfsigned, prometheus, prometheus-rules,
	// grafana, network-policy).
	BaseDir = "config/polyop"
	// DefaultEntry deploys the project with the webhook server's certificate
	// made by the host itself (--webhook-self-signed): make deploy's default.
	DefaultEntry = "config/default"
	// CertManagerEntry deploys the project with the webhook server's
	// certificate from cert-manager: make deploy OVERLAY=default-certmanager.
	CertManagerEntry = "config/default-certmanager"
	// SidecarDir is the component that sets the sidecar container's
	// arguments (its address); the image's entry point starts the sidecar.
	SidecarDir = "config/sidecar"
	// CRDKustomization lists the CRDs of CRDDir; polyop generate keeps it up
	// to date.
	CRDKustomization = "config/crd/kustomization.yaml"
	// WebhookKustomization is the component holding WebhooksFile and, for a
	// sidecar that converts kinds, ConversionFile; polyop generate writes it.
	WebhookKustomization = "config/webhook/kustomization.yaml"
	// ConversionFile holds the conversion stanzas of the CRDs the sidecar
	// converts, patched into them by the webhook component.
	ConversionFile = "config/webhook/conversion.yaml"
)

// The names polyop's base gives, which the entries prefix with the
// project's name and put in its namespace: generated manifests name them.
const (
	baseNamespace      = "system"
	baseServiceAccount = "controller-manager"
	baseRoleName       = "manager-role"
	baseWebhookName    = "webhook"
)

// Namespace is the namespace a project deploys into.
func Namespace(p *Project) string { return p.Name + "-system" }

// writeConfig writes the parts of config/ every project has, whatever its
// language: polyop's base, the entries config/default and
// config/default-certmanager, the sidecar's component, the samples'
// kustomization, and, until polyop generate writes them from the sidecar's
// description, the CRDs' kustomization, the host's RBAC and the (empty)
// webhook configurations.
func writeConfig(w *Writer, p *Project) error {
	if err := copyBase(w); err != nil {
		return err
	}
	for _, e := range []struct {
		dir         string
		certManager bool
	}{{DefaultEntry, false}, {CertManagerEntry, true}} {
		data := struct {
			*Project
			CertManager         bool
			Namespace           string
			HostImageRepository string
			SidecarImage        string
		}{p, e.certManager, Namespace(p), HostImageRepository, p.Name + "-sidecar"}
		if err := w.RenderFile(path.Join(e.dir, "kustomization.yaml"), templates, "config/default/kustomization.yaml.tmpl", data); err != nil {
			return err
		}
	}
	// The same in every project: templates with nothing to fill in.
	for _, f := range []struct{ path, template string }{
		{path.Join(SidecarDir, "kustomization.yaml"), "config/sidecar/kustomization.yaml.tmpl"},
		{path.Join(SidecarDir, "sidecar_patch.yaml"), "config/sidecar/sidecar_patch.yaml.tmpl"},
		{path.Join(SamplesDir, "kustomization.yaml"), "config/samples/kustomization.yaml.tmpl"},
		{path.Join(path.Dir(RoleFile), "kustomization.yaml"), "config/rbac/kustomization.yaml.tmpl"},
	} {
		if err := w.RenderFile(f.path, templates, f.template, nil); err != nil {
			return err
		}
	}
	files, err := describedFiles(p, nil)
	if err != nil {
		return err
	}
	crds, err := crdKustomization(w.Root)
	if err != nil {
		return err
	}
	files = append(files, generatedFile{CRDKustomization, crds})
	for _, f := range files {
		if err := w.WriteFile(f.path, f.content); err != nil {
			return err
		}
	}
	return nil
}

// copyBase writes polyop's kustomize base into BaseDir.
func copyBase(w *Writer) error {
	base := polyopconfig.Base()
	return fs.WalkDir(base, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(base, name)
		if err != nil {
			return err
		}
		return w.WriteFile(path.Join(BaseDir, name), data)
	})
}

// writeSample writes r's sample and lists it in config/samples.
func writeSample(w *Writer, _ *Project, r *Resource) error {
	sample := fmt.Sprintf(`apiVersion: %s
kind: %s
metadata:
  name: %s
spec:
  message: %s
`, r.APIVersion(), r.Kind, SampleName(r), SampleMessage)
	if err := w.WriteFile(r.SampleFile(), []byte(sample)); err != nil {
		return err
	}
	return w.Insert(path.Join(SamplesDir, "kustomization.yaml"), "+polyop:scaffold:samples", "- "+path.Base(r.SampleFile()))
}
