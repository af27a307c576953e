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
// deploys: the one polyop's `make docker-build` tags.
const HostImageRepository = "polyop-host"

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
		if err := w.Template(path.Join(e.dir, "kustomization.yaml"), entryKustomization, data); err != nil {
			return err
		}
	}
	if err := w.WriteFile(path.Join(SidecarDir, "kustomization.yaml"), []byte(sidecarKustomization)); err != nil {
		return err
	}
	if err := w.WriteFile(path.Join(SidecarDir, "sidecar_patch.yaml"), []byte(sidecarPatch)); err != nil {
		return err
	}
	if err := w.WriteFile(path.Join(SamplesDir, "kustomization.yaml"), []byte(samplesKustomization)); err != nil {
		return err
	}
	if err := w.WriteFile(path.Join(path.Dir(RoleFile), "kustomization.yaml"), []byte(rbacKustomization)); err != nil {
		return err
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

// entryKustomization is config/default and config/default-certmanager.
const entryKustomization = `# [[.Name]]: the polyop host and the sidecar in one pod[[if .CertManager]], with the webhook server's
# certificate from cert-manager (https://cert-manager.io), which must be
# installed in the cluster:
#
#   make deploy OVERLAY=default-certmanager IMG=<sidecar image>
#
# ../default is the same without cert-manager.[[else]], for a cluster without
# cert-manager: the host makes its webhook server's certificate itself
# (--webhook-self-signed) and keeps it in a Secret.
#
#   make deploy IMG=<sidecar image>
#
# ../default-certmanager is the same with cert-manager.[[end]] ../polyop is polyop's own
# base, as polyop init copied it; ../crd, ../rbac and ../webhook are what
# polyop generate (make manifests) writes from the project's types and the
# sidecar's description.

# Everything lands in this namespace, every name gets this prefix (as in
# kubebuilder's config/default).
namespace: [[.Namespace]]
namePrefix: [[.Name]]-

resources:
- ../polyop/default
- ../crd
- ../rbac

components:
# The sidecar container's arguments.
- ../sidecar
# The host's webhook server, its Service and the webhook configurations. The
# host serves it only when the sidecar declares webhooks or conversions.
- ../polyop/webhook
- ../polyop/[[if .CertManager]]certmanager[[else]]selfsigned[[end]]
- ../webhook
# [PROMETHEUS] A ServiceMonitor, for a cluster running the Prometheus Operator.
#- ../polyop/prometheus
# [ALERTS] The PrometheusRule of polyop's alerts (needs the ServiceMonitor).
#- ../polyop/prometheus-rules
# [DASHBOARD] polyop's Grafana dashboard, as a ConfigMap Grafana's dashboard
# sidecar loads (needs the ServiceMonitor).
#- ../polyop/grafana
# [NETWORK POLICY] Only labelled namespaces reach metrics and webhooks.
#- ../polyop/network-policy

# Fill in the names the [[if .CertManager]]certificate and CA injection refer[[else]]host's certificate flags and RBAC refer[[end]] to, once prefixed.
transformers:
- ../polyop/[[if .CertManager]]certmanager/inject-ca[[else]]selfsigned/names[[end]]

# The host of the polyop this project was made with, and the sidecar's image
# (make deploy IMG=... deploys another without changing this file).
images:
- name: host
  newName: [[.HostImageRepository]]
  newTag: "[[.PolyopVersion]]"
- name: sidecar
  newName: [[.SidecarImage]]
  newTag: latest
`

const sidecarKustomization = `# The sidecar container: the address it serves on, the one the host dials.
# Its image's entry point (the Dockerfile's ENTRYPOINT) starts the sidecar;
# set a command here if it does not. Both config/default and
# config/default-certmanager list this component.
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
- path: sidecar_patch.yaml
  target:
    kind: Deployment
    name: controller-manager
`

const sidecarPatch = `# containers/1 is the sidecar (config/polyop/manager/manager.yaml). JSON
# patches keep the containers' order, which every patch of the Deployment
# relies on.
#
# The address the host dials (its --sidecar-address).
- op: add
  path: /spec/template/spec/containers/1/args
  value:
  - --address=unix:///var/run/polyop/sidecar.sock
`

const rbacKustomization = `# The host's RBAC: role.yaml is what polyop generate (make manifests) derives
# from the sidecar's description. What the sidecar reads or writes through
# the Cluster service beyond the kinds it declares is not in the
# description: grant it in a file of your own here, bound to the
# ServiceAccount controller-manager in the namespace system (kustomize
# prefixes both), and list it below.
resources:
- role.yaml
`

const samplesKustomization = `## One sample per kind: polyop create api adds them here.
resources:
# +polyop:scaffold:samples
`

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
