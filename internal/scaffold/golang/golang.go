// Package golang scaffolds polyop projects whose sidecar is written in Go on
// the Go SDK (github.com/polyop/polyop/sdk/go), laid out as kubebuilder lays
// out its go/v4 projects: the types in api/<version> with kubebuilder's
// markers, the reconcilers in internal/controller, the admission handlers in
// internal/webhook/<version>, the sidecar's main in cmd/sidecar. polyop
// generate runs controller-gen over api/ as make generate and make manifests
// do in a kubebuilder project.
//
// Importing the package registers its Scaffolder for scaffold.Go.
package golang

import (
	"fmt"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/polyop/polyop/internal/scaffold"
)

func init() { scaffold.Register(scaffold.Go, Scaffolder{}) }

// SDKModule is the Go SDK's module path.
const SDKModule = "github.com/polyop/polyop/sdk/go"

// GoVersion is the go directive of a new project's go.mod: the SDK's.
const GoVersion = "1.26.0"

// Requires are the modules a new project's go.mod asks for besides the SDK,
// at the versions the SDK's go.mod asks for (a test checks they agree), so
// that the project builds with the SDK's own build list.
var Requires = []Require{
	{"github.com/go-logr/logr", "v1.4.4"},
	{"k8s.io/api", "v0.37.0"},
	{"k8s.io/apimachinery", "v0.37.0"},
	{"k8s.io/client-go", "v0.37.0"},
	{"sigs.k8s.io/controller-runtime", "v0.25.2"},
}

// Require is one line of a go.mod's require block.
type Require struct{ Path, Version string }

// The sidecar's binary, its main package and the Setup stamp.
const (
	sidecarBinary = "bin/sidecar"
	sidecarMain   = "./cmd/sidecar"
	mainFile      = "cmd/sidecar/main.go"
	setupStamp    = "bin/.modules"
)

// Scaffolder is the scaffold.Scaffolder of Go projects.
type Scaffolder struct{}

var _ scaffold.Scaffolder = Scaffolder{}

// Defaults sets the module path to <domain>/<project name> when none is
// given, and the sidecar's build and start commands.
func (Scaffolder) Defaults(p *scaffold.Project) error {
	if p.Repo == "" {
		p.Repo = p.Domain + "/" + p.Name
	}
	if !modulePath.MatchString(p.Repo) {
		return fmt.Errorf("--repo %q: use a Go module path, such as example.com/%s", p.Repo, p.Name)
	}
	if _, err := sdkVersion(p); err != nil {
		return err
	}
	p.Sidecar = scaffold.SidecarCommands{
		Build:   []string{"go", "build", "-o", sidecarBinary, sidecarMain},
		Command: []string{sidecarBinary},
	}
	return nil
}

var (
	modulePath = regexp.MustCompile(`^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$`)
	semverRE   = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
)

// sdkVersion is the version of the SDK a project requires: its polyop
// version, or v0.0.0 for a development build of polyop that takes the SDK
// from a checkout (the replace makes the version moot).
func sdkVersion(p *scaffold.Project) (string, error) {
	v := p.PolyopVersion
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	if semverRE.MatchString(v) {
		return v, nil
	}
	if p.SDKSource != "" {
		return "v0.0.0", nil
	}
	return "", fmt.Errorf("this polyop is version %q, which has no published Go SDK to depend on: pass --sdk-source with a checkout of polyop's repository", p.PolyopVersion)
}

// data is what every template sees.
type data struct {
	P *scaffold.Project
	// R is the resource being added, when one is.
	R *scaffold.Resource
	// SDKVersion is the SDK's version in go.mod.
	SDKVersion string
	Requires   []Require
	GoVersion  string
	// Hub is the version every other version of R's kind converts to and
	// from: the first one created, the storage version.
	Hub *scaffold.Resource
	// Webhooks are the handlers of R's version being written.
	Webhooks scaffold.Webhooks
	// MetaAlias is the name zz_generated.deepcopy.go gives
	// k8s.io/apimachinery/pkg/apis/meta/v1: controller-gen's, metav1 in a
	// package v1 and v1 elsewhere.
	MetaAlias string
}

// Alias is the import name of the resource's API package: group and
// version, as kubebuilder names it (shipv1).
func (d data) Alias(r *scaffold.Resource) string { return apiAlias(r) }

// IsHub reports whether R is the first version of its kind: the storage
// version, and the hub of conversion.
func (d data) IsHub() bool { return d.Hub == d.R }

// Reconciler is the name of R's reconciler type.
func (d data) Reconciler() string { return reconcilerName(d.P, d.R) }

// ControllerName is the name of R's controller, as the host knows it.
func (d data) ControllerName() string { return controllerName(d.P, d.R) }

// SampleName is the name of R's sample object.
func (d data) SampleName() string { return scaffold.SampleName(d.R) }

// SampleMessage is the sample's spec.message, and the defaulter's.
func (data) SampleMessage() string { return scaffold.SampleMessage }

func apiAlias(r *scaffold.Resource) string {
	group := r.Group
	if group == "" {
		group = strings.SplitN(r.Domain, ".", 2)[0]
	}
	return identifier(group) + r.Version
}

func identifier(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.ToLower(s))
}

// apiDir is the folder of a version's types, kubebuilder's single-group
// layout.
func apiDir(r *scaffold.Resource) string { return path.Join("api", r.Version) }

// APIImport is the import path of a version's types.
func (d data) APIImport(r *scaffold.Resource) string { return d.P.Repo + "/" + apiDir(r) }

func lower(r *scaffold.Resource) string { return strings.ToLower(r.Kind) }

// Init writes the module, the sidecar's main and its test, the Dockerfile,
// .gitignore and the header controller-gen puts on the files it writes.
func (Scaffolder) Init(w *scaffold.Writer, p *scaffold.Project) error {
	v, err := sdkVersion(p)
	if err != nil {
		return err
	}
	d := data{P: p, SDKVersion: v, Requires: Requires, GoVersion: GoVersion}
	for _, f := range []struct{ path, template string }{
		{"go.mod", "go.mod.tmpl"},
		{mainFile, "main.go.tmpl"},
		{"cmd/sidecar/main_test.go", "main_test.go.tmpl"},
		{"hack/boilerplate.go.txt", "boilerplate.go.txt.tmpl"},
		{"Dockerfile", "Dockerfile.tmpl"},
		{".dockerignore", "dockerignore.tmpl"},
		{".gitignore", "gitignore.tmpl"},
		{"api/doc.go", "api_doc.go.tmpl"},
		{"internal/controller/doc.go", "controller_doc.go.tmpl"},
	} {
		if err := w.RenderFile(f.path, templates, f.template, d); err != nil {
			return err
		}
	}
	return nil
}

// Tasks are the Makefile's Go recipes and the README's Go section.
func (Scaffolder) Tasks(p *scaffold.Project) scaffold.Tasks {
	return scaffold.Tasks{
		Setup: []string{
			"go mod tidy",
			"go mod download",
			"mkdir -p bin",
			"touch " + setupStamp,
		},
		Stamp:  setupStamp,
		Deps:   []string{"go.mod"},
		Build:  []string{"go build -o " + sidecarBinary + " " + sidecarMain},
		Test:   []string{"go test ./..."},
		Lint:   []string{"go vet ./..."},
		Clean:  []string{"bin", "cover.out"},
		Readme: templates.MustRender("readme.md.tmpl", data{P: p}),
	}
}

// CreateAPI writes the kind's types (api/<version>), its deep copy
// functions, its reconciler (internal/controller) and the reconciler's test,
// and registers them in cmd/sidecar/main.go.
func (Scaffolder) CreateAPI(w *scaffold.Writer, p *scaffold.Project, r *scaffold.Resource) error {
	for _, other := range p.Resources {
		if other.API && other.Version == r.Version && other.APIGroup() != r.APIGroup() {
			return fmt.Errorf("api/%s holds the types of %s already: a Go project keeps one group per version (kubebuilder's single-group layout); use another version for %s",
				r.Version, other.APIGroup(), r.APIGroup())
		}
	}
	kinds := p.Kinds(r.Group, r.Kind)
	d := data{P: p, R: r, Hub: kinds[0]}
	root := w.Root
	if r.API {
		dir := apiDir(r)
		if !exists(root, path.Join(dir, "groupversion_info.go")) {
			if err := w.RenderFile(path.Join(dir, "groupversion_info.go"), templates, "groupversion_info.go.tmpl", d); err != nil {
				return err
			}
		}
		if err := w.RenderFile(path.Join(dir, lower(r)+"_types.go"), templates, "types.go.tmpl", d); err != nil {
			return err
		}
		if err := writeDeepCopy(w, d); err != nil {
			return err
		}
		if err := insertGo(w, mainFile, "+polyop:scaffold:imports", fmt.Sprintf("%s %q", apiAlias(r), d.APIImport(r))); err != nil {
			return err
		}
		if err := insertGo(w, mainFile, "+polyop:scaffold:scheme", fmt.Sprintf("if err := %s.AddToScheme(scheme); err != nil {\n\treturn nil, err\n}", apiAlias(r))); err != nil {
			return err
		}
	}
	if r.API && r != kinds[0] && converts(kinds) {
		// The kind converts already: a version without ConvertTo and
		// ConvertFrom would stop the sidecar at start (the scheme would
		// hold a version that neither is the hub nor converts to it).
		if err := writeSpoke(w, p, r, kinds[0]); err != nil {
			return err
		}
		if r.Webhooks == nil {
			r.Webhooks = &scaffold.Webhooks{}
		}
		r.Webhooks.Conversion = true
	}
	if r.Controller {
		base := path.Join("internal/controller", lower(r)+"_controller")
		if reconcilerName(p, r) != r.Kind+"Reconciler" {
			// A second controller of the kind, at another version: its
			// files and type are named after the version as well.
			base += "_" + r.Version
		}
		if err := w.RenderFile(base+".go", templates, "controller.go.tmpl", d); err != nil {
			return err
		}
		if err := w.RenderFile(base+"_test.go", templates, "controller_test.go.tmpl", d); err != nil {
			return err
		}
		if err := insertGo(w, mainFile, "+polyop:scaffold:imports", fmt.Sprintf("%q", p.Repo+"/internal/controller")); err != nil {
			return err
		}
		if err := insertGo(w, mainFile, "+polyop:scaffold:controllers", fmt.Sprintf(
			"if err := (&controller.%s{}).SetupWithServer(srv); err != nil {\n\treturn nil, fmt.Errorf(\"setting up the %s controller: %%w\", err)\n}",
			reconcilerName(p, r), r.Kind)); err != nil {
			return err
		}
	}
	return nil
}

// reconcilerName is the reconciler's type: <Kind>Reconciler, with the
// version appended for a second version's controller.
func reconcilerName(p *scaffold.Project, r *scaffold.Resource) string {
	if kinds := p.Kinds(r.Group, r.Kind); len(kinds) > 1 && kinds[0] != r {
		for _, k := range kinds {
			if k != r && k.Controller {
				return r.Kind + title(r.Version) + "Reconciler"
			}
		}
	}
	return r.Kind + "Reconciler"
}

// controllerName is the controller's name as the host knows it.
func controllerName(p *scaffold.Project, r *scaffold.Resource) string {
	name := lower(r)
	if reconcilerName(p, r) != r.Kind+"Reconciler" {
		name += "-" + r.Version
	}
	return name
}

func title(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// writeDeepCopy writes the deep copy functions of the new kind, as
// controller-gen object would, so that the project builds at once; polyop
// generate regenerates the file from the types after they change. A
// version that has a zz_generated.deepcopy.go already (another kind) gets
// the new kind's functions appended.
func writeDeepCopy(w *scaffold.Writer, d data) error {
	file := path.Join(apiDir(d.R), "zz_generated.deepcopy.go")
	full := filepath.Join(w.Root, filepath.FromSlash(file))
	existing, err := os.ReadFile(full)
	if os.IsNotExist(err) {
		d.MetaAlias = "v1"
		if d.R.Version == "v1" {
			d.MetaAlias = "metav1"
		}
		header, err := templates.Render("deepcopy_header.go.tmpl", d)
		if err != nil {
			return err
		}
		funcs, err := templates.Render("deepcopy_funcs.go.tmpl", d)
		if err != nil {
			return err
		}
		return w.WriteFile(file, append(header, funcs...))
	}
	if err != nil {
		return err
	}
	if strings.Contains(string(existing), "func (in *"+d.R.Kind+") DeepCopyInto(") {
		return nil
	}
	d.MetaAlias, err = importName(file, existing, "k8s.io/apimachinery/pkg/apis/meta/v1")
	if err != nil {
		return err
	}
	funcs, err := templates.Render("deepcopy_funcs.go.tmpl", d)
	if err != nil {
		return err
	}
	// The file is generated code, rewritten by every polyop generate:
	// appending to it is no edit of the user's to keep.
	appender := &scaffold.Writer{Root: w.Root, Force: true}
	return appender.WriteFile(file, append(existing, funcs...))
}

// importName returns the name under which a Go file imports pkg.
func importName(file string, src []byte, pkg string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.ImportsOnly)
	if err != nil {
		return "", err
	}
	for _, imp := range f.Imports {
		if imp.Path.Value == strconv.Quote(pkg) {
			if imp.Name != nil {
				return imp.Name.Name, nil
			}
			return path.Base(pkg), nil
		}
	}
	return "", fmt.Errorf("%s does not import %s: run polyop generate to regenerate it, then create the kind again with --force", file, pkg)
}

// CreateWebhook writes the defaulting and validation handlers of r's
// version (internal/webhook/<version>), registered in cmd/sidecar/main.go,
// and for conversion the hub's Hub method and the spokes' ConvertTo and
// ConvertFrom (api/<version>/<kind>_conversion.go).
func (Scaffolder) CreateWebhook(w *scaffold.Writer, p *scaffold.Project, asked *scaffold.Resource) error {
	r := p.FindResource(asked.Group, asked.Version, asked.Kind)
	if r == nil {
		return fmt.Errorf("the project has no %s %s", asked.APIVersion(), asked.Kind)
	}
	kinds := p.Kinds(r.Group, r.Kind)
	d := data{P: p, R: r, Hub: kinds[0]}
	if asked.Webhooks.Defaulting || asked.Webhooks.Validation {
		d.Webhooks = scaffold.Webhooks{Defaulting: asked.Webhooks.Defaulting, Validation: asked.Webhooks.Validation}
		if err := writeWebhook(w, d); err != nil {
			return err
		}
	}
	if !asked.Webhooks.Conversion {
		return nil
	}
	hub := kinds[0]
	hd := data{P: p, R: hub, Hub: hub}
	if file := path.Join(apiDir(hub), lower(hub)+"_conversion.go"); !exists(w.Root, file) {
		if err := w.RenderFile(file, templates, "hub_conversion.go.tmpl", hd); err != nil {
			return err
		}
	}
	for _, spoke := range kinds[1:] {
		if err := writeSpoke(w, p, spoke, hub); err != nil {
			return err
		}
	}
	// The hub's webhook builder registers the conversion (the SDK finds
	// the Hub and Convertible versions in the scheme); a hub with no
	// handlers gets a builder of its own.
	if !exists(w.Root, webhookFile(hub)) {
		hd.Webhooks = scaffold.Webhooks{Conversion: true}
		return writeWebhook(w, hd)
	}
	return nil
}

// converts reports whether a version of the kind converts through the hub.
func converts(kinds []*scaffold.Resource) bool {
	for _, k := range kinds {
		if k.Webhooks != nil && k.Webhooks.Conversion {
			return true
		}
	}
	return false
}

// writeSpoke writes the ConvertTo and ConvertFrom of a version that is not
// the hub, and their test, unless it has them.
func writeSpoke(w *scaffold.Writer, p *scaffold.Project, spoke, hub *scaffold.Resource) error {
	d := data{P: p, R: spoke, Hub: hub}
	for _, f := range []struct{ suffix, template string }{
		{"_conversion.go", "spoke_conversion.go.tmpl"},
		{"_conversion_test.go", "conversion_test.go.tmpl"},
	} {
		if file := path.Join(apiDir(spoke), lower(spoke)+f.suffix); !exists(w.Root, file) {
			if err := w.RenderFile(file, templates, f.template, d); err != nil {
				return err
			}
		}
	}
	return nil
}

func webhookFile(r *scaffold.Resource) string {
	return path.Join("internal/webhook", r.Version, lower(r)+"_webhook.go")
}

// writeWebhook adds the handlers d.Webhooks asks for to the webhook file of
// d.R's version, writing it (and registering it in main.go) when it is new,
// and their tests to its test file.
func writeWebhook(w *scaffold.Writer, d data) error {
	file := webhookFile(d.R)
	test := strings.TrimSuffix(file, ".go") + "_test.go"
	if !exists(w.Root, file) {
		if err := w.RenderFile(file, templates, "webhook.go.tmpl", d); err != nil {
			return err
		}
		alias := "webhook" + apiAlias(d.R)
		if err := insertGo(w, mainFile, "+polyop:scaffold:imports", fmt.Sprintf("%s %q", alias, d.P.Repo+"/"+path.Dir(file))); err != nil {
			return err
		}
		if err := insertGo(w, mainFile, "+polyop:scaffold:webhooks", fmt.Sprintf(
			"if err := %s.Setup%sWebhookWithServer(srv); err != nil {\n\treturn nil, fmt.Errorf(\"setting up the %s webhooks: %%w\", err)\n}",
			alias, d.R.Kind, d.R.Kind)); err != nil {
			return err
		}
	}
	for _, h := range []struct {
		asked         bool
		imports       []string
		builder, code string
		testImports   []string
		testCode      string
	}{
		{d.Webhooks.Defaulting, defaulterImports, "defaulter_builder.go.tmpl", "defaulter.go.tmpl", nil, "defaulter_test.go.tmpl"},
		{d.Webhooks.Validation, validatorImports, "validator_builder.go.tmpl", "validator.go.tmpl", validatorTestImports, "validator_test.go.tmpl"},
	} {
		if !h.asked {
			continue
		}
		if step, err := templates.Render(h.builder, d); err != nil {
			return err
		} else if content, err := os.ReadFile(filepath.Join(w.Root, filepath.FromSlash(file))); err != nil {
			return err
		} else if strings.Contains(string(content), string(step)) {
			continue // the handler is there already
		}
		if err := addToGoFile(w, d, file, h.imports, h.builder, h.code); err != nil {
			return err
		}
		if !exists(w.Root, test) {
			if err := w.RenderFile(test, templates, "webhook_test.go.tmpl", d); err != nil {
				return err
			}
		}
		if err := addToGoFile(w, d, test, h.testImports, "", h.testCode); err != nil {
			return err
		}
	}
	return nil
}

// addToGoFile adds imports (before the imports marker), a builder step
// (before the builder marker) and code (at the end) to a Go file.
func addToGoFile(w *scaffold.Writer, d data, file string, imports []string, builder, code string) error {
	for _, imp := range imports {
		if err := insertGo(w, file, "+polyop:scaffold:imports", imp); err != nil {
			return err
		}
	}
	if builder != "" {
		step, err := templates.Render(builder, d)
		if err != nil {
			return err
		}
		if err := insertGo(w, file, "+polyop:scaffold:builder", string(step)); err != nil {
			return err
		}
	}
	add, err := templates.Render(code, d)
	if err != nil {
		return err
	}
	full := filepath.Join(w.Root, filepath.FromSlash(file))
	src, err := os.ReadFile(full)
	if err != nil {
		return err
	}
	if err := os.WriteFile(full, append(src, add...), 0o644); err != nil {
		return err
	}
	return gofmt(w.Root, file)
}

// insertGo inserts text before marker in a Go file unless the file has
// it already (see scaffold.Writer.InsertOnce), keeping the file formatted.
func insertGo(w *scaffold.Writer, file, marker, text string) error {
	if err := w.InsertOnce(file, marker, text); err != nil {
		return err
	}
	return gofmt(w.Root, file)
}

// gofmt formats a Go file as gofmt does, sorting its imports: code inserted
// before a marker keeps the file formatted.
func gofmt(root, file string) error {
	full := filepath.Join(root, filepath.FromSlash(file))
	src, err := os.ReadFile(full)
	if err != nil {
		return err
	}
	out, err := format.Source(src)
	if err != nil {
		return fmt.Errorf("%s does not parse after polyop added code to it: %w", file, err)
	}
	return os.WriteFile(full, out, 0o644)
}

func exists(root, file string) bool {
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(file)))
	return err == nil
}
