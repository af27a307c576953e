package scaffold

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// InitOptions are polyop init's.
type InitOptions struct {
	// Dir is the folder to make the project in; it must be empty unless
	// Force is set.
	Dir string
	// Name is the project's name. Defaults to Dir's base name.
	Name string
	// Language is the sidecar's language.
	Language Language
	// Domain is the suffix of the project's API groups.
	Domain string
	// Repo is the Go module path (Go) and Package the Python or npm package
	// (Python, TypeScript); each language chooses one from Name when empty.
	Repo, Package string
	// Version is the polyop version the project depends on.
	Version string
	// SDKSource, when set, is a local checkout of polyop's repository the
	// project takes its SDK from.
	SDKSource string
	// Force writes into a folder that is not empty, overwriting files.
	Force bool
}

// Init makes a new project and returns the files it wrote.
func Init(o InitOptions) ([]string, error) {
	root, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if !o.Force {
		if err := CheckEmpty(root); err != nil {
			return nil, err
		}
	}
	name := o.Name
	if name == "" {
		name = strings.ToLower(filepath.Base(root))
	}
	if err := ValidateName(name); err != nil {
		return nil, fmt.Errorf("%w (set it with --project-name)", err)
	}
	if err := ValidateDomain(o.Domain); err != nil {
		return nil, err
	}
	s, err := For(o.Language)
	if err != nil {
		return nil, err
	}
	p := &Project{
		Version:       ProjectVersion,
		Name:          name,
		Language:      o.Language,
		Domain:        o.Domain,
		Repo:          o.Repo,
		Package:       o.Package,
		PolyopVersion: o.Version,
	}
	if o.SDKSource != "" {
		if p.SDKSource, err = checkSDKSource(o.SDKSource); err != nil {
			return nil, err
		}
	}
	if err := s.Defaults(p); err != nil {
		return nil, err
	}
	w := &Writer{Root: root, Force: o.Force}
	if err := s.Init(w, p); err != nil {
		return w.Written(), err
	}
	if err := writeMakefile(w, p, s.Tasks(p)); err != nil {
		return w.Written(), err
	}
	if err := writeConfig(w, p); err != nil {
		return w.Written(), err
	}
	if err := p.Save(root); err != nil {
		return w.Written(), err
	}
	return append(w.Written(), ProjectFile), nil
}

// checkSDKSource returns the absolute path of a checkout of polyop's
// repository, or an error saying why path is not one.
func checkSDKSource(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	for _, want := range []string{"sdk/go/go.mod", "sdk/python/pyproject.toml", "sdk/typescript/package.json"} {
		if _, err := os.Stat(filepath.Join(abs, filepath.FromSlash(want))); err != nil {
			return "", fmt.Errorf("--sdk-source %s is not a checkout of polyop's repository (no %s)", path, want)
		}
	}
	return abs, nil
}

// APIOptions are polyop create api's.
type APIOptions struct {
	Dir                              string
	Group, Version, Kind, Plural     string
	Namespaced, Resource, Controller bool
	Force                            bool
}

// CreateAPI adds a kind to the project at o.Dir and returns the files it
// wrote.
func CreateAPI(o APIOptions) ([]string, error) {
	p, root, s, err := loadProject(o.Dir)
	if err != nil {
		return nil, err
	}
	if !o.Resource && !o.Controller {
		return nil, errors.New("nothing to create: pass --resource, --controller or both")
	}
	r, err := NewResource(p, o.Group, o.Version, o.Kind, o.Plural, o.Namespaced)
	if err != nil {
		return nil, err
	}
	if p.FindResource(r.Group, r.Version, r.Kind) != nil {
		return nil, fmt.Errorf("the project has %s %s already", r.APIVersion(), r.Kind)
	}
	if !o.Resource && len(p.Kinds(r.Group, r.Kind)) == 0 {
		return nil, fmt.Errorf("a controller of %s %s needs its type: pass --resource too (the project has no version of the kind)", r.APIVersion(), r.Kind)
	}
	r.API, r.Controller = o.Resource, o.Controller
	p.Resources = append(p.Resources, r)
	res := &p.Resources[len(p.Resources)-1]

	w := &Writer{Root: root, Force: o.Force}
	if err := s.CreateAPI(w, p, res); err != nil {
		return w.Written(), err
	}
	if res.API {
		if err := writeSample(w, p, res); err != nil {
			return w.Written(), err
		}
	}
	if err := p.Save(root); err != nil {
		return w.Written(), err
	}
	return append(w.Written(), ProjectFile), nil
}

// WebhookOptions are polyop create webhook's.
type WebhookOptions struct {
	Dir                                string
	Group, Version, Kind               string
	Defaulting, Validation, Conversion bool
	Force                              bool
}

// CreateWebhook adds admission webhooks or conversion to a kind of the
// project at o.Dir and returns the files it wrote.
func CreateWebhook(o WebhookOptions) ([]string, error) {
	p, root, s, err := loadProject(o.Dir)
	if err != nil {
		return nil, err
	}
	if !o.Defaulting && !o.Validation && !o.Conversion {
		return nil, errors.New("nothing to create: pass --defaulting, --programmatic-validation, --conversion or several")
	}
	r := p.FindResource(o.Group, o.Version, o.Kind)
	if r == nil {
		return nil, fmt.Errorf("the project has no %s/%s %s: run polyop create api --group %s --version %s --kind %s first",
			o.Group, o.Version, o.Kind, o.Group, o.Version, o.Kind)
	}
	if !r.API {
		return nil, fmt.Errorf("the project does not define %s %s (no --resource): its webhooks belong where its type is", r.APIVersion(), r.Kind)
	}
	if o.Conversion && len(p.Kinds(r.Group, r.Kind)) < 2 {
		return nil, fmt.Errorf("conversion of %s needs two versions of it: run polyop create api for another version first", r.Kind)
	}
	if r.Webhooks == nil {
		r.Webhooks = &Webhooks{}
	}
	for _, f := range []struct {
		name  string
		asked bool
		has   *bool
	}{
		{"defaulting", o.Defaulting, &r.Webhooks.Defaulting},
		{"validation", o.Validation, &r.Webhooks.Validation},
		{"conversion", o.Conversion, &r.Webhooks.Conversion},
	} {
		if f.asked && *f.has && !o.Force {
			return nil, fmt.Errorf("%s %s has a %s webhook already (pass --force to write it again)", r.APIVersion(), r.Kind, f.name)
		}
		*f.has = *f.has || f.asked
	}
	asked := &Webhooks{Defaulting: o.Defaulting, Validation: o.Validation, Conversion: o.Conversion}
	w := &Writer{Root: root, Force: o.Force}
	if err := s.CreateWebhook(w, p, &Resource{
		Group: r.Group, Domain: r.Domain, Version: r.Version, Kind: r.Kind, Plural: r.Plural,
		Namespaced: r.Namespaced, API: r.API, Controller: r.Controller, Webhooks: asked,
	}); err != nil {
		return w.Written(), err
	}
	if err := p.Save(root); err != nil {
		return w.Written(), err
	}
	return append(w.Written(), ProjectFile), nil
}

// Generate regenerates the CRDs of the project at dir from its types: the
// language's part of polyop generate. The command then lists them
// (WriteCRDKustomization) and writes the host's RBAC and the webhook
// configurations from the sidecar's description (WriteDescribed).
func Generate(ctx context.Context, dir string, log io.Writer) error {
	p, root, s, err := loadProject(dir)
	if err != nil {
		return err
	}
	return s.GenerateCRDs(ctx, p, root, log)
}

// loadProject loads the project at dir (or above it) and its language's
// Scaffolder.
func loadProject(dir string) (*Project, string, Scaffolder, error) {
	p, root, err := LoadProject(dir)
	if err != nil {
		return nil, "", nil, err
	}
	s, err := For(p.Language)
	if err != nil {
		return nil, "", nil, err
	}
	return p, root, s, nil
}

// RunCommand runs a command of a language's generate step in dir, printing
// it and its output to log. env is the command's environment; nil is
// polyop's own.
func RunCommand(ctx context.Context, dir string, log io.Writer, env []string, name string, args ...string) error {
	fmt.Fprintf(log, "%s %s\n", name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("%s %s failed (%w): see its output above", filepath.Base(name), strings.Join(args, " "), err)
		}
		return err
	}
	return nil
}
