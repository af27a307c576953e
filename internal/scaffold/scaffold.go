package scaffold

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/gobuffalo/flect"
)

// Scaffolder writes and regenerates the parts of a project that depend on
// its language. Each language has one (see internal/scaffold/golang,
// python and typescript); the commands do the parts that do not depend on
// the language (the PROJECT file, config/, the samples, RBAC and webhook
// configurations from the sidecar's description) around it.
type Scaffolder interface {
	// Defaults fills in what polyop init leaves to the language: the
	// package name or module path when the user gave none, and the
	// sidecar's build and start commands.
	Defaults(p *Project) error

	// Init writes a new project's language files: the sidecar's entry point
	// on the SDK, the dependency files, the Dockerfile, .gitignore and the
	// test setup with one passing test. The Makefile and README, common to
	// every language, are written around the language's Tasks.
	Init(w *Writer, p *Project) error

	// Tasks returns the language's recipes for the Makefile's targets and
	// its section of the README.
	Tasks(p *Project) Tasks

	// CreateAPI writes a new kind: its types (r.API) and reconciler
	// (r.Controller), registered with the sidecar, and a unit test. r is
	// already in p.Resources.
	CreateAPI(w *Writer, p *Project, r *Resource) error

	// CreateWebhook writes the admission handlers (defaulting, validation)
	// and conversion that r.Webhooks asks for now, registered with the
	// sidecar, and a unit test. p's resource already records them.
	CreateWebhook(w *Writer, p *Project, r *Resource) error

	// GenerateCRDs writes the CRD of every API resource of p into CRDDir
	// (relative to root) from the project's types, printing what it runs
	// to log.
	GenerateCRDs(ctx context.Context, p *Project, root string, log io.Writer) error
}

// Tasks are a language's parts of a project's Makefile and README. Each
// recipe is a list of shell lines, run in the project's root by make.
type Tasks struct {
	// Setup installs the project's dependencies (a virtualenv, node_modules,
	// Go modules); every other target depends on it. It makes Stamp, a file
	// newer than the dependency files once they are installed, so make runs
	// it only when they change.
	Setup []string
	// Stamp is the file Setup makes, relative to the root.
	Stamp string
	// Deps are the files whose change makes Setup run again (go.mod,
	// pyproject.toml, package.json).
	Deps []string
	// Build builds the sidecar (polyop run and generate run
	// Project.Sidecar.Build themselves).
	Build []string
	// Test runs the project's tests.
	Test []string
	// Lint runs the language's checks (go vet, mypy, tsc), when it has any.
	Lint []string
	// Clean lists the files and folders make clean removes.
	Clean []string
	// Polyop is the command the Makefile runs polyop with unless POLYOP is
	// set, when the project installs its own polyop with its dependencies
	// (Setup); empty is polyop, found on PATH.
	Polyop string
	// Readme is the language's section of the README, in Markdown: where
	// the code is and how to work on it.
	Readme string
}

var (
	dnsLabel  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsName   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	kindName  = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	versionRE = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
)

// ValidateName checks a project name: a DNS label (lower-case letters,
// digits and dashes) of at most 40 characters, so that the names made from
// it fit Kubernetes' limits.
func ValidateName(name string) error {
	if len(name) > 40 || !dnsLabel.MatchString(name) {
		return fmt.Errorf("project name %q: use lower-case letters, digits and dashes, at most 40, starting and ending with a letter or digit", name)
	}
	return nil
}

// ValidateDomain checks a project's domain: a DNS name such as example.com.
func ValidateDomain(domain string) error {
	if domain == "" || len(domain) > 200 || !dnsName.MatchString(domain) {
		return fmt.Errorf("domain %q: use a DNS name in lower case, such as example.com", domain)
	}
	return nil
}

// NewResource checks group, version and kind and returns the resource of p
// they name, with its plural (given, else made from the kind as
// kubebuilder makes it: Frigate → frigates, Policy → policies).
func NewResource(p *Project, group, version, kind, plural string, namespaced bool) (Resource, error) {
	if group != "" && !dnsLabel.MatchString(group) {
		return Resource{}, fmt.Errorf("group %q: use a DNS label in lower case, such as ship (the API group becomes ship.%s)", group, p.Domain)
	}
	if !versionRE.MatchString(version) {
		return Resource{}, fmt.Errorf("version %q: use v1, v2, v1alpha1, v1beta2 and the like", version)
	}
	if !kindName.MatchString(kind) {
		return Resource{}, fmt.Errorf("kind %q: use CamelCase starting with an upper-case letter, such as Frigate", kind)
	}
	if plural == "" {
		plural = flect.Pluralize(strings.ToLower(kind))
	}
	if !dnsLabel.MatchString(plural) {
		return Resource{}, fmt.Errorf("plural %q: use a DNS label in lower case", plural)
	}
	return Resource{Group: group, Domain: p.Domain, Version: version, Kind: kind, Plural: plural, Namespaced: namespaced}, nil
}
