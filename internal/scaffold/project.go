// Package scaffold makes and extends polyop projects: polyop init writes a
// project in Go, Python or TypeScript, polyop create api and create webhook
// add a kind to it, polyop generate regenerates what is derived from its
// code, and polyop run reads how to build and start its sidecar.
//
// A project is recorded in its PROJECT file, as kubebuilder's is, so that
// every later command knows the language, the domain and the resources.
package scaffold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// ProjectFile is the name of the project file at a project's root.
const ProjectFile = "PROJECT"

// ProjectVersion is the version of the PROJECT file's layout this polyop
// writes and reads.
const ProjectVersion = "1"

// The folders and files of a project that polyop commands read and write,
// relative to the project's root, in every language.
const (
	// CRDDir holds the CustomResourceDefinitions polyop generate writes, one
	// file per kind: <group>_<plural>.yaml.
	CRDDir = "config/crd/bases"
	// SamplesDir holds one sample object per kind:
	// <group>_<version>_<kind, lower case>.yaml.
	SamplesDir = "config/samples"
	// RoleFile is the host's ClusterRole, generated from the sidecar's
	// description.
	RoleFile = "config/rbac/role.yaml"
	// WebhooksFile holds the webhook configurations, generated from the
	// sidecar's description (empty of objects when it declares none).
	WebhooksFile = "config/webhook/manifests.yaml"
)

// Language is the language of a project's sidecar.
type Language string

// The languages polyop init supports.
const (
	Go         Language = "go"
	Python     Language = "python"
	TypeScript Language = "typescript"
)

// Languages lists the supported languages, in the order help prints them.
var Languages = []Language{Go, Python, TypeScript}

// ParseLanguage returns the language named s (go, python or typescript; py
// and ts too).
func ParseLanguage(s string) (Language, error) {
	switch strings.ToLower(s) {
	case "go", "golang":
		return Go, nil
	case "python", "py":
		return Python, nil
	case "typescript", "ts":
		return TypeScript, nil
	}
	return "", fmt.Errorf("unknown language %q: use go, python or typescript", s)
}

// Project is the content of a PROJECT file.
type Project struct {
	// Version is the version of the file's layout: ProjectVersion.
	Version string `json:"version"`
	// Name is the project's name: a DNS label, used for the sidecar's name,
	// the images and the deployment's name prefix.
	Name string `json:"projectName"`
	// Language is the sidecar's language.
	Language Language `json:"language"`
	// Domain is the suffix of every API group of the project: a kind of
	// group "ship" and domain "example.com" is in ship.example.com.
	Domain string `json:"domain"`
	// Repo is the Go module path of a Go project.
	Repo string `json:"repo,omitempty"`
	// Package is the Python package (import name) of a Python project, or
	// the npm package name of a TypeScript one.
	Package string `json:"package,omitempty"`
	// PolyopVersion is the version of polyop the project was made with: the
	// SDK version it depends on and the host image it deploys.
	PolyopVersion string `json:"polyopVersion"`
	// SDKSource, when set, is a local checkout of polyop's repository the
	// project takes its SDK from instead of the published one (polyop init
	// --sdk-source).
	SDKSource string `json:"sdkSource,omitempty"`
	// Sidecar says how polyop run builds and starts the sidecar.
	Sidecar SidecarCommands `json:"sidecar"`
	// Resources are the kinds added with polyop create api and create
	// webhook, in the order they were added.
	Resources []Resource `json:"resources,omitempty"`
}

// SidecarCommands say how to build and start a project's sidecar, each a
// program and its arguments, run in the project's root.
type SidecarCommands struct {
	// Build, when set, builds the sidecar before it starts (polyop run,
	// polyop generate).
	Build []string `json:"build,omitempty"`
	// Command starts the sidecar; polyop appends "--address <address>".
	Command []string `json:"command"`
}

// Resource is one kind of a project.
type Resource struct {
	// Group is the group's first label: the API group is Group.Domain (or
	// Domain alone when Group is empty).
	Group string `json:"group,omitempty"`
	// Domain is the project's domain, recorded with the resource as
	// kubebuilder does.
	Domain string `json:"domain"`
	// Version is the API version, such as v1 or v1alpha1.
	Version string `json:"version"`
	// Kind is the kind, in CamelCase.
	Kind string `json:"kind"`
	// Plural is the resource name: the kind in lower case, plural.
	Plural string `json:"plural"`
	// Namespaced is true for a namespaced kind, false for a cluster-scoped one.
	Namespaced bool `json:"namespaced"`
	// API is true when the project defines the kind's type and CRD.
	API bool `json:"api,omitempty"`
	// Controller is true when the sidecar reconciles the kind.
	Controller bool `json:"controller,omitempty"`
	// Webhooks are the kind's admission webhooks and conversion, when any.
	Webhooks *Webhooks `json:"webhooks,omitempty"`
}

// Webhooks are what polyop create webhook added for a kind.
type Webhooks struct {
	// Defaulting is a mutating admission webhook (the sidecar's Default).
	Defaulting bool `json:"defaulting,omitempty"`
	// Validation is a validating admission webhook (the sidecar's Validate).
	Validation bool `json:"validation,omitempty"`
	// Conversion converts between the kind's versions (the sidecar's Convert).
	Conversion bool `json:"conversion,omitempty"`
}

// APIGroup is the resource's full API group.
func (r Resource) APIGroup() string {
	switch {
	case r.Group == "":
		return r.Domain
	case r.Domain == "":
		return r.Group
	}
	return r.Group + "." + r.Domain
}

// APIVersion is the resource's apiVersion: group/version.
func (r Resource) APIVersion() string { return r.APIGroup() + "/" + r.Version }

// CRDName is the name of the resource's CustomResourceDefinition.
func (r Resource) CRDName() string { return r.Plural + "." + r.APIGroup() }

// CRDFile is the resource's CRD file, relative to the project's root.
func (r Resource) CRDFile() string {
	return filepath.ToSlash(filepath.Join(CRDDir, r.APIGroup()+"_"+r.Plural+".yaml"))
}

// SampleFile is the resource's sample, relative to the project's root.
func (r Resource) SampleFile() string {
	group := r.Group
	if group == "" {
		group = strings.ReplaceAll(r.Domain, ".", "-")
	}
	return filepath.ToSlash(filepath.Join(SamplesDir, group+"_"+r.Version+"_"+strings.ToLower(r.Kind)+".yaml"))
}

// FindResource returns the project's resource of group (the first label or
// the full API group), version and kind, or nil.
func (p *Project) FindResource(group, version, kind string) *Resource {
	for i := range p.Resources {
		r := &p.Resources[i]
		if (r.Group == group || r.APIGroup() == group) && r.Version == version && r.Kind == kind {
			return r
		}
	}
	return nil
}

// Kinds returns the resources of one group and kind (its several versions),
// in the order they were added.
func (p *Project) Kinds(group, kind string) []*Resource {
	var out []*Resource
	for i := range p.Resources {
		if r := &p.Resources[i]; (r.Group == group || r.APIGroup() == group) && r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// LoadProject reads the PROJECT file of the project at dir, or of the
// nearest folder above dir that has one, and returns the project and its
// root.
func LoadProject(dir string) (*Project, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", err
	}
	for d := abs; ; {
		data, err := os.ReadFile(filepath.Join(d, ProjectFile))
		switch {
		case err == nil:
			p, err := ParseProject(data)
			if err != nil {
				return nil, "", fmt.Errorf("%s: %w", filepath.Join(d, ProjectFile), err)
			}
			return p, d, nil
		case !errors.Is(err, os.ErrNotExist):
			return nil, "", err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return nil, "", fmt.Errorf("no %s file in %s or a folder above it: run polyop init first, or run the command in a polyop project", ProjectFile, abs)
		}
		d = parent
	}
}

// ParseProject decodes and checks a PROJECT file's content.
func ParseProject(data []byte) (*Project, error) {
	if err := refuseKubebuilderProject(data); err != nil {
		return nil, err
	}
	p := &Project{}
	if err := yaml.UnmarshalStrict(data, p); err != nil {
		return nil, err
	}
	if p.Version != ProjectVersion {
		return nil, fmt.Errorf("version %q: this polyop reads PROJECT files of version %q", p.Version, ProjectVersion)
	}
	if !slices.Contains(Languages, p.Language) {
		return nil, fmt.Errorf("language %q: use go, python or typescript", p.Language)
	}
	if len(p.Sidecar.Command) == 0 {
		return nil, errors.New("sidecar.command is empty: it says how polyop run starts the sidecar")
	}
	return p, nil
}

// refuseKubebuilderProject refuses kubebuilder's PROJECT file, which has the
// same name as polyop's and sits at the root of a kubebuilder project being
// moved into a sidecar, with an error that says what it is and what to do,
// rather than a complaint about its first unknown field.
func refuseKubebuilderProject(data []byte) error {
	var kb struct {
		Layout     []string `json:"layout"`
		CLIVersion string   `json:"cliVersion"`
	}
	if err := yaml.Unmarshal(data, &kb); err != nil || len(kb.Layout) == 0 && kb.CLIVersion == "" {
		return nil
	}
	layout := strings.Join(kb.Layout, ", ")
	if layout == "" {
		layout = "cliVersion " + kb.CLIVersion
	}
	return fmt.Errorf("this is kubebuilder's PROJECT file (%s), not polyop's: polyop reads its own, of version %q; "+
		"replace it with the one `polyop init --language go --domain DOMAIN --repo MODULE` writes in an empty folder "+
		"(see docs/migrating.md in polyop's repository)", layout, ProjectVersion)
}

// projectHeader starts every PROJECT file.
const projectHeader = `# The polyop project file: polyop init wrote it and polyop create keeps it
# up to date. Later polyop commands read it to know where to write. Edit it
# with care.
`

// Save writes the project's PROJECT file into the project's root.
func (p *Project) Save(root string) error {
	data, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, ProjectFile), append([]byte(projectHeader), data...), 0o644)
}
