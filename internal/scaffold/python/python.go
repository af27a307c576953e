// Package python scaffolds polyop projects whose sidecar is written in
// Python, on the polyop Python SDK: a src-layout package with a
// pyproject.toml, typed (mypy --strict), linted (ruff) and tested (pytest on
// polyop.testing's host-less harness). Its kinds are pydantic models
// declared with polyop.crd, from which polyop generate writes the CRDs.
//
// A project's package (here "frigates") is laid out as:
//
//	src/frigates/__main__.py          python -m frigates --address ADDRESS: serves the sidecar
//	src/frigates/sidecar.py           new_sidecar(): every controller and webhook registers here
//	src/frigates/api/v1/frigate.py    the Frigate kind at v1 (@crd.kind on a crd.Resource)
//	src/frigates/controllers/frigate.py
//	src/frigates/webhooks/frigate_v1.py, frigate_conversion.py
//	tests/test_frigate.py, test_frigate_v1_webhooks.py, ...
//
// Each controller and webhook module has a setup(sidecar) function, as a
// kubebuilder controller has SetupWithManager; polyop create adds its call
// to sidecar.py at the +polyop:scaffold markers.
package python

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/polyop/polyop/internal/scaffold"
)

func init() { scaffold.Register(scaffold.Python, Scaffolder{}) }

// templateFS holds the templates of a Python project's files. They see a
// data.
//
//go:embed templates
var templateFS embed.FS

var templates = scaffold.Templates{FS: templateFS}

// The versions of the tools a project's dev extra pins: those this
// repository checks its own Python code with (sdk/python/requirements-dev.txt).
const (
	pytestVersion = "9.2.0"
	mypyVersion   = "2.4.1"
	ruffVersion   = "0.17.6"
)

// MaxMessageLength is the longest spec.message the scaffolded validation
// webhook allows.
const MaxMessageLength = 64

// Venv is a project's virtualenv, relative to its root.
const Venv = ".venv"

// venvPython is the virtualenv's interpreter, which runs the sidecar and
// polyop.crd.
const venvPython = Venv + "/bin/python"

// sdkWheels is where Setup puts the SDK's wheel built from --sdk-source, for
// the virtualenv and the Dockerfile to install.
const sdkWheels = "dist/sdk"

// Markers in src/<package>/sidecar.py where polyop create adds code.
const (
	importsMarker = "+polyop:scaffold:imports"
	setupMarker   = "+polyop:scaffold:setup"
)

// Scaffolder is the Python language's scaffold.Scaffolder.
type Scaffolder struct{}

var _ scaffold.Scaffolder = Scaffolder{}

// Defaults makes the package name from the project name (dashes become
// underscores) when none was given, and the sidecar's command: the
// virtualenv's python running the package.
func (Scaffolder) Defaults(p *scaffold.Project) error {
	if p.Package == "" {
		p.Package = strings.ReplaceAll(p.Name, "-", "_")
		if err := checkPackage(p.Package); err != nil {
			return fmt.Errorf("project name %q does not make a Python package name (%w): pass --package", p.Name, err)
		}
	} else if err := checkPackage(p.Package); err != nil {
		return fmt.Errorf("--package: %w", err)
	}
	p.Sidecar.Build = nil
	p.Sidecar.Command = []string{venvPython, "-m", p.Package}
	return nil
}

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// keywords are Python's keywords and the soft keywords a module cannot be
// named after (a package named "match" imports, but reads badly).
var keywords = []string{
	"and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else", "except",
	"finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass",
	"raise", "return", "try", "while", "with", "yield", "match", "case", "type",
}

// checkPackage checks a Python package name: a lower-case identifier that is
// not a keyword and does not hide a package the project imports.
func checkPackage(name string) error {
	switch {
	case !identifier.MatchString(name):
		return fmt.Errorf("package %q: use lower-case letters, digits and underscores, not starting with a digit", name)
	case slices.Contains(keywords, name):
		return fmt.Errorf("package %q is a Python keyword", name)
	case slices.Contains([]string{"polyop", "pydantic", "tests", "test", "grpc", "google", "yaml"}, name):
		return fmt.Errorf("package %q would hide the package of that name the project imports", name)
	}
	return nil
}

// data is what the templates see.
type data struct {
	*scaffold.Project
	// R is the resource a create command writes, when any.
	R *scaffold.Resource
	// Module is R's kind as a module and variable name: Frigate → frigate,
	// FrigateClass → frigate_class.
	Module string
	// Var names an object of R's kind in functions: the module's name, or
	// obj when that is a keyword or a name the scaffolded code uses.
	Var string
	// ModelVersion is the version whose model a controller of R takes: R's
	// own, or (for a controller without --resource) the first version of the
	// kind that has one.
	ModelVersion string
	// Storage is true when R is its kind's first version, the storage one.
	Storage bool
	// Versions are the kind's versions with types, for its conversion, in
	// the order they were added (VersionText: "v1, v2 and v3");
	// SortedVersions in order of their names, and VersionList those as a
	// Python list.
	Versions, SortedVersions []string
	VersionList, VersionText string
	// Webhooks are R's admission webhooks as the project records them.
	Webhooks scaffold.Webhooks
	// SampleName, SampleMessage, MaxMessageLength, the tools' versions and
	// the folder of the SDK's wheel are the constants the templates write.
	SampleName                                      string
	SampleMessage                                   string
	MaxMessageLength                                int
	PytestVersion, MypyVersion, RuffVersion, Wheels string
	// SDK is the project's requirement on the SDK (see sdkRequirement).
	SDK string
}

// pep440 matches the release versions pip can pin: 0.1.0, 1.2.0rc1, ...
var pep440 = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$`)

// sdkRequirement is the project's requirement on the SDK: polyop at the
// version of polyop that made the project; for a build of polyop that is no
// release (dev), the version of the --sdk-source checkout, or else any
// version.
func sdkRequirement(p *scaffold.Project) string {
	if v := strings.TrimPrefix(p.PolyopVersion, "v"); pep440.MatchString(v) {
		return "polyop==" + v
	}
	if p.SDKSource != "" {
		if v, err := os.ReadFile(filepath.Join(p.SDKSource, "VERSION")); err == nil && pep440.MatchString(strings.TrimSpace(string(v))) {
			return "polyop==" + strings.TrimSpace(string(v))
		}
	}
	return "polyop"
}

func newData(p *scaffold.Project, r *scaffold.Resource) *data {
	d := &data{
		Project:          p,
		R:                r,
		SampleMessage:    scaffold.SampleMessage,
		MaxMessageLength: MaxMessageLength,
		PytestVersion:    pytestVersion,
		MypyVersion:      mypyVersion,
		RuffVersion:      ruffVersion,
		Wheels:           sdkWheels,
		SDK:              sdkRequirement(p),
	}
	if r != nil {
		d.Module = snake(r.Kind)
		d.Var = d.Module
		if slices.Contains(keywords, d.Var) || slices.Contains([]string{"polyop", "crd", "ctx", "req", "sidecar", "generation"}, d.Var) {
			d.Var = "obj"
		}
		d.SampleName = scaffold.SampleName(r)
		d.ModelVersion = r.Version
		kinds := p.Kinds(r.Group, r.Kind)
		if !r.API {
			for _, k := range kinds {
				if k.API {
					d.ModelVersion = k.Version
					break
				}
			}
		}
		for _, k := range kinds {
			if k.API {
				d.Versions = append(d.Versions, k.Version)
			}
		}
		d.Storage = len(d.Versions) == 0 || d.Versions[0] == r.Version
		d.SortedVersions = slices.Sorted(slices.Values(d.Versions))
		quoted := make([]string, len(d.SortedVersions))
		for i, v := range d.SortedVersions {
			quoted[i] = `"` + v + `"`
		}
		d.VersionList = "[" + strings.Join(quoted, ", ") + "]"
		d.VersionText = strings.Join(d.Versions, ", ")
		if n := len(d.Versions); n > 1 {
			d.VersionText = strings.Join(d.Versions[:n-1], ", ") + " and " + d.Versions[n-1]
		}
		if own := p.FindResource(r.Group, r.Version, r.Kind); own != nil && own.Webhooks != nil {
			d.Webhooks = *own.Webhooks
		}
	}
	return d
}

// snake turns a CamelCase kind into a snake_case name: FrigateClass →
// frigate_class, HTTPRoute → http_route.
func snake(kind string) string {
	var b strings.Builder
	runes := []rune(kind)
	for i, r := range runes {
		if unicode.IsUpper(r) && i > 0 && (unicode.IsLower(runes[i-1]) || unicode.IsDigit(runes[i-1]) ||
			(i+1 < len(runes) && unicode.IsLower(runes[i+1]))) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// renderOnce is Writer.RenderFile for a file several commands share (a package's
// __init__.py): it leaves the file alone when it exists.
func renderOnce(w *scaffold.Writer, path, name string, d *data) error {
	if _, err := os.Stat(filepath.Join(w.Root, filepath.FromSlash(path))); err == nil {
		return nil
	}
	return w.RenderFile(path, templates, name, d)
}

func src(p *scaffold.Project, elem ...string) string {
	return path.Join(append([]string{"src", p.Package}, elem...)...)
}

// Init writes the project's pyproject.toml, its package (the entry point
// and new_sidecar with the scaffold markers), a passing test, the
// Dockerfile and the ignore files.
func (Scaffolder) Init(w *scaffold.Writer, p *scaffold.Project) error {
	d := newData(p, nil)
	for _, f := range []struct{ path, template string }{
		{"pyproject.toml", "pyproject.toml.tmpl"},
		{src(p, "__init__.py"), "package_init.py.tmpl"},
		{src(p, "__main__.py"), "main.py.tmpl"},
		{src(p, "sidecar.py"), "sidecar.py.tmpl"},
		{src(p, "py.typed"), "py.typed.tmpl"},
		{src(p, "api", "__init__.py"), "api_init.py.tmpl"},
		{src(p, "controllers", "__init__.py"), "controllers_init.py.tmpl"},
		{src(p, "webhooks", "__init__.py"), "webhooks_init.py.tmpl"},
		{"tests/__init__.py", "py.typed.tmpl"},
		{"tests/test_sidecar.py", "test_sidecar.py.tmpl"},
		{"Dockerfile", "Dockerfile.tmpl"},
		{".dockerignore", "dockerignore.tmpl"},
		{".gitignore", "gitignore.tmpl"},
	} {
		if err := w.RenderFile(f.path, templates, f.template, d); err != nil {
			return err
		}
	}
	return nil
}

// Tasks are the project's recipes: a virtualenv in .venv with the project
// installed editable with its dev extra (and, with --sdk-source, the SDK
// built as a wheel from that checkout first, so the project uses it as it
// would a published one); pytest; ruff and mypy --strict.
func (Scaffolder) Tasks(p *scaffold.Project) scaffold.Tasks {
	setup := []string{"python3 -m venv " + Venv}
	if p.SDKSource != "" {
		sdk := scaffold.ShellQuote(path.Join(filepath.ToSlash(p.SDKSource), "sdk/python"))
		setup = append(setup,
			"rm -rf "+sdkWheels,
			Venv+"/bin/pip wheel --no-deps --wheel-dir "+sdkWheels+" "+sdk,
			Venv+"/bin/pip install --force-reinstall --no-deps "+sdkWheels+"/polyop-*.whl",
		)
	}
	setup = append(setup,
		Venv+"/bin/pip install -e '.[dev]'",
		"touch "+Venv+"/.installed",
	)
	return scaffold.Tasks{
		Setup: setup,
		Stamp: Venv + "/.installed",
		Deps:  []string{"pyproject.toml"},
		Test:  []string{Venv + "/bin/pytest"},
		Lint: []string{
			Venv + "/bin/ruff check",
			Venv + "/bin/mypy --strict src tests",
		},
		Clean:  []string{Venv, "dist", "build", ".mypy_cache", ".pytest_cache", ".ruff_cache"},
		Readme: templates.MustRender("readme.md.tmpl", newData(p, nil)),
	}
}

// CreateAPI writes the kind's model (with --resource) in
// src/<package>/api/<version>/<kind>.py and its controller (with
// --controller) in src/<package>/controllers/<kind>.py, registered in
// sidecar.py, with its test in tests/test_<kind>.py.
func (Scaffolder) CreateAPI(w *scaffold.Writer, p *scaffold.Project, r *scaffold.Resource) error {
	d := newData(p, r)
	if r.API {
		if err := renderOnce(w, src(p, "api", r.Version, "__init__.py"), "version_init.py.tmpl", d); err != nil {
			return err
		}
		if err := w.RenderFile(src(p, "api", r.Version, d.Module+".py"), templates, "types.py.tmpl", d); err != nil {
			return err
		}
	}
	if !r.Controller {
		return nil
	}
	if err := w.RenderFile(src(p, "controllers", d.Module+".py"), templates, "controller.py.tmpl", d); err != nil {
		return err
	}
	if err := w.RenderFile("tests/test_"+d.Module+".py", templates, "controller_test.py.tmpl", d); err != nil {
		return err
	}
	return register(w, p, "controllers", d.Module, d.Module+"_controller")
}

// register imports module from the package's folder in sidecar.py as alias
// and calls its setup there.
func register(w *scaffold.Writer, p *scaffold.Project, folder, module, alias string) error {
	sidecar := src(p, "sidecar.py")
	imp := fmt.Sprintf("from %s.%s import %s", p.Package, folder, module)
	if alias != module {
		imp += " as " + alias
	}
	if err := w.InsertOnce(sidecar, importsMarker, imp); err != nil {
		return err
	}
	return w.InsertOnce(sidecar, setupMarker, alias+".setup(sidecar)")
}

// CreateWebhook writes the kind's defaulting and validation webhooks at
// its version in src/<package>/webhooks/<kind>_<version>.py, and its
// conversion between every version in <kind>_conversion.py, each registered
// in sidecar.py and tested.
func (Scaffolder) CreateWebhook(w *scaffold.Writer, p *scaffold.Project, r *scaffold.Resource) error {
	d := newData(p, r)
	if r.Webhooks.Defaulting || r.Webhooks.Validation {
		module := d.Module + "_" + r.Version
		if err := w.RenderFile(src(p, "webhooks", module+".py"), templates, "webhooks.py.tmpl", d); err != nil {
			return err
		}
		if err := w.RenderFile("tests/test_"+module+"_webhooks.py", templates, "webhooks_test.py.tmpl", d); err != nil {
			return err
		}
		if err := register(w, p, "webhooks", module, module+"_webhooks"); err != nil {
			return err
		}
	}
	if r.Webhooks.Conversion {
		module := d.Module + "_conversion"
		if err := w.RenderFile(src(p, "webhooks", module+".py"), templates, "conversion.py.tmpl", d); err != nil {
			return err
		}
		if err := w.RenderFile("tests/test_"+module+".py", templates, "conversion_test.py.tmpl", d); err != nil {
			return err
		}
		if err := register(w, p, "webhooks", module, module); err != nil {
			return err
		}
	}
	return nil
}

// GenerateCRDs runs python -m polyop.crd with the project's virtualenv on
// the modules of every kind the project defines, writing one
// <group>_<plural>.yaml per kind into config/crd/bases.
func (s Scaffolder) GenerateCRDs(ctx context.Context, p *scaffold.Project, root string, log io.Writer) error {
	var modules []string
	for _, r := range p.Resources {
		if !r.API {
			continue
		}
		if m := p.Package + ".api." + r.Version + "." + snake(r.Kind); !slices.Contains(modules, m) {
			modules = append(modules, m)
		}
	}
	if len(modules) == 0 {
		fmt.Fprintf(log, "no kinds: polyop create api adds one\n")
		return nil
	}
	python := filepath.Join(root, filepath.FromSlash(venvPython))
	if _, err := os.Stat(python); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no virtualenv in %s (no %s): run make manifests, which makes it first, or: %s",
			filepath.Join(root, Venv), venvPython, strings.Join(s.Tasks(p).Setup, " && "))
	}
	args := append([]string{"-m", "polyop.crd"}, modules...)
	args = append(args, "-o", scaffold.CRDDir)
	fmt.Fprintf(log, "%s %s\n", venvPython, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Dir = root
	cmd.Stdout = log
	cmd.Stderr = log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s -m polyop.crd (the CRDs from the models in %s): %w", venvPython, strings.Join(modules, ", "), err)
	}
	return nil
}
