// Package typescript scaffolds polyop projects whose sidecar is written in
// TypeScript, on the @polyop/sidecar SDK: an npm package of ES modules
// compiled by tsc (strict, NodeNext) into dist/, tested with node's test
// runner, with its kinds declared as TypeBox schemas from which
// @polyop/sidecar/crd's polyop-crd writes the CRDs.
//
// A project's layout:
//
//	package.json, tsconfig.json    the package, its scripts (build, test, lint) and the compiler's settings
//	src/main.ts                    the entry point: parses --address and serves the sidecar
//	src/sidecar.ts                 newSidecar(): what the sidecar registers (scaffold markers)
//	src/api/<version>/<kind>.ts    a kind's types (defineKind), one module per version
//	src/controllers/<kind>.ts      a kind's reconciler, and its test on the SDK's Harness
//	src/webhooks/...               defaulters, validators and converters, and their tests
//
// Importing the package registers it with internal/scaffold.
package typescript

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/polyop/polyop/internal/scaffold"
)

func init() { scaffold.Register(scaffold.TypeScript, Scaffolder{}) }

// The versions a project pins, the same this repository's package.json
// files pin (a test keeps them equal): the SDK's schema library, the
// compiler and Node.js's types, and the Node.js image the Dockerfile builds
// on.
const (
	TypeBoxVersion    = "0.34.52"
	TypeScriptVersion = "5.9.3"
	NodeTypesVersion  = "20.19.43"
	NodeImage         = "node:20.20.2-bookworm-slim"
)

// The scaffold markers of src/sidecar.ts, before which polyop create adds
// an import and a registration.
const (
	sidecarFile    = "src/sidecar.ts"
	importsMarker  = "+polyop:scaffold:imports"
	registerMarker = "+polyop:scaffold:register"
)

// Stamp is the file the Setup recipe touches once npm has installed the
// dependencies.
const Stamp = "node_modules/.polyop-setup"

// MaxMessageLength is the longest spec.message the scaffolded validator
// allows.
const MaxMessageLength = 64

// vendorDir holds the SDK's tarball in a project made with --sdk-source.
const vendorDir = "vendor"

// LocalPolyop is the polyop a project installs as its devDependency
// @polyop/cli, at the SDK's version: what its Makefile runs (POLYOP), as
// `npx polyop` and its package.json's scripts do.
const LocalPolyop = "node_modules/.bin/polyop"

// Scaffolder is the TypeScript scaffold.Scaffolder.
type Scaffolder struct{}

var _ scaffold.Scaffolder = Scaffolder{}

// npmName is what npm accepts as a package name: lower case, an optional
// @scope/, at most 214 characters.
var npmName = regexp.MustCompile(`^(@[a-z0-9-~][a-z0-9-._~]*/)?[a-z0-9-~][a-z0-9-._~]*$`)

// semver is a release version npm can install: 1.2.3, 1.2.3-rc.1.
var semver = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// Defaults sets the npm package name (the project's name unless given) and
// the sidecar's commands: npm run build, then node dist/main.js.
func (Scaffolder) Defaults(p *scaffold.Project) error {
	if p.Package == "" {
		p.Package = p.Name
	}
	if len(p.Package) > 214 || !npmName.MatchString(p.Package) {
		return fmt.Errorf("package %q is not an npm package name: use lower-case letters, digits, '-', '.' and '_', optionally under an @scope/", p.Package)
	}
	p.Sidecar = scaffold.SidecarCommands{
		Build:   []string{"npm", "run", "build"},
		Command: []string{"node", "dist/main.js"},
	}
	return nil
}

// projectData is what the project's templates read.
type projectData struct {
	Name, Package string
	SDKDependency string
	// CLIDependency is the version of @polyop/cli, the polyop command, the
	// project depends on (a devDependency), or "" for none.
	CLIDependency    string
	Vendor           bool
	TypeBox          string
	TypeScript       string
	NodeTypes        string
	NodeImage        string
	SidecarImportDoc string
}

func newProjectData(p *scaffold.Project) (projectData, error) {
	d := projectData{
		Name: p.Name, Package: p.Package, SDKDependency: p.PolyopVersion, CLIDependency: p.PolyopVersion,
		TypeBox: TypeBoxVersion, TypeScript: TypeScriptVersion, NodeTypes: NodeTypesVersion, NodeImage: NodeImage,
	}
	if p.SDKSource != "" {
		tarball, err := sdkTarball(p.SDKSource)
		if err != nil {
			return d, err
		}
		d.SDKDependency, d.Vendor = "file:"+vendorDir+"/"+tarball, true
		// @polyop/cli carries polyop's binaries, which a checkout does not
		// pack (make release-npm builds them for every platform, minutes
		// of work), and a file: dependency on it would still fetch its
		// platform package from the registry, at a version maybe never
		// published. The project depends on no @polyop/cli: the polyop on
		// PATH, the checkout's that made it, is the one its Makefile and
		// scripts run.
		d.CLIDependency = ""
	} else if !semver.MatchString(p.PolyopVersion) {
		return d, fmt.Errorf("this polyop's version is %q, which no published @polyop/sidecar has: pass --sdk-source with a checkout of polyop's repository", p.PolyopVersion)
	}
	return d, nil
}

// sdkTarball is the name of the tarball `make dist-typescript` packs from
// the SDK of the polyop checkout src: polyop-sidecar-<version>.tgz.
func sdkTarball(src string) (string, error) {
	data, err := os.ReadFile(filepath.Join(src, "sdk", "typescript", "package.json"))
	if err != nil {
		return "", fmt.Errorf("--sdk-source: reading the TypeScript SDK's package.json: %w", err)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(data, &pkg); err != nil || pkg.Version == "" {
		return "", fmt.Errorf("--sdk-source: %s has no version", filepath.Join(src, "sdk", "typescript", "package.json"))
	}
	return "polyop-sidecar-" + pkg.Version + ".tgz", nil
}

// Init writes package.json, tsconfig.json, the entry point, the sidecar
// with its scaffold markers and one test, the Dockerfile and the ignore
// files.
func (Scaffolder) Init(w *scaffold.Writer, p *scaffold.Project) error {
	d, err := newProjectData(p)
	if err != nil {
		return err
	}
	for _, f := range []struct{ path, template string }{
		{"package.json", "package.json.tmpl"},
		{"tsconfig.json", "tsconfig.json.tmpl"},
		{"src/main.ts", "main.ts.tmpl"},
		{sidecarFile, "sidecar.ts.tmpl"},
		{"src/sidecar.test.ts", "sidecar.test.ts.tmpl"},
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

// Tasks are npm's: npm install, then the package's scripts build (tsc), test
// (tsc, then node --test on the compiled tests) and lint (tsc --noEmit).
// polyop is the project's own (LocalPolyop), which npm install puts into
// node_modules/.bin. With --sdk-source, Setup first packs the checkout's SDK
// (make dist-typescript there) and copies the tarball into vendor/, which
// package.json depends on, and polyop is the one on PATH.
func (Scaffolder) Tasks(p *scaffold.Project) scaffold.Tasks {
	setup := []string{"npm install --no-audit --no-fund", "touch " + Stamp}
	if p.SDKSource != "" {
		tarball, err := sdkTarball(p.SDKSource)
		if err != nil {
			tarball = "polyop-sidecar-" + p.PolyopVersion + ".tgz"
		}
		// Naming the tarball makes npm install it again when it changed,
		// which a plain npm install, content with the lockfile, does not;
		// ./ keeps npm from reading vendor/… as a GitHub repository.
		setup = []string{
			"make -C " + scaffold.ShellQuote(p.SDKSource) + " --no-print-directory dist-typescript",
			"mkdir -p " + vendorDir,
			"cp " + scaffold.ShellQuote(filepath.Join(p.SDKSource, "dist", "typescript", tarball)) + " " + vendorDir + "/",
			"npm install --no-audit --no-fund ./" + vendorDir + "/" + tarball,
			"touch " + Stamp,
		}
	}
	readme := templates.MustRender("readme.md.tmpl", struct {
		Package string
		Vendor  bool
	}{p.Package, p.SDKSource != ""})
	polyop := LocalPolyop
	if p.SDKSource != "" {
		polyop = ""
	}
	return scaffold.Tasks{
		Setup:  setup,
		Stamp:  Stamp,
		Deps:   []string{"package.json"},
		Build:  []string{"npm run build"},
		Test:   []string{"npm test"},
		Lint:   []string{"npm run lint"},
		Clean:  []string{"dist"},
		Polyop: polyop,
		Readme: readme,
	}
}

// resourceData is what the templates of a kind read.
type resourceData struct {
	Name          string // the project's
	Kind, Lower   string
	Var           string // the object's variable: Lower, unless a reserved word
	Group         string // the full API group
	Version       string
	APIVersion    string
	Plural        string
	Namespaced    bool
	Storage       bool   // the kind's first version: the stored one
	Ident         string // the kind's name in src/sidecar.ts: Frigate + V1
	Message       string // scaffold.SampleMessage
	MaxMessage    int
	SampleName    string
	Versions      []versionData // every version of the kind with a type, for conversion
	APIFromParent string        // the path of the kind's module from the file's folder, without .js
}

type versionData struct{ Version, Ident, Module string }

func newResourceData(p *scaffold.Project, r *scaffold.Resource) resourceData {
	d := resourceData{
		Name: p.Name, Kind: r.Kind, Lower: strings.ToLower(r.Kind), Var: varName(r.Kind), Group: r.APIGroup(), Version: r.Version,
		APIVersion: r.APIVersion(), Plural: r.Plural, Namespaced: r.Namespaced, Storage: true,
		Ident: ident(r), Message: scaffold.SampleMessage, MaxMessage: MaxMessageLength, SampleName: scaffold.SampleName(r),
	}
	for _, k := range p.Kinds(r.Group, r.Kind) {
		if !k.API {
			continue
		}
		if k.Version != r.Version && d.Versions == nil {
			d.Storage = false // an earlier version is stored
		}
		d.Versions = append(d.Versions, versionData{Version: k.Version, Ident: ident(k), Module: apiModule(k)})
	}
	return d
}

// reserved are the words of JavaScript and TypeScript a lower-case kind
// could be that cannot name a variable.
var reserved = map[string]bool{
	"break": true, "case": true, "catch": true, "class": true, "const": true, "continue": true, "debugger": true,
	"default": true, "delete": true, "do": true, "else": true, "enum": true, "export": true, "extends": true,
	"false": true, "finally": true, "for": true, "function": true, "if": true, "import": true, "in": true,
	"instanceof": true, "new": true, "null": true, "return": true, "super": true, "switch": true, "this": true,
	"throw": true, "true": true, "try": true, "typeof": true, "var": true, "void": true, "while": true, "with": true,
	"implements": true, "interface": true, "let": true, "package": true, "private": true, "protected": true,
	"public": true, "static": true, "yield": true, "await": true,
}

// varName is the variable a handler names its object of kind by: the kind
// in lower case, or with "Obj" after it when that is a reserved word.
func varName(kind string) string {
	if v := strings.ToLower(kind); !reserved[v] {
		return v
	}
	return strings.ToLower(kind) + "Obj"
}

// ident names a version of a kind in the modules that import several:
// FrigateV1, FrigateV2beta1.
func ident(r *scaffold.Resource) string {
	return r.Kind + strings.ToUpper(r.Version[:1]) + r.Version[1:]
}

// apiModule is the module of a version of a kind, relative to src/ and
// without its extension: api/v1/frigate.
func apiModule(r *scaffold.Resource) string {
	return path.Join("api", r.Version, strings.ToLower(r.Kind))
}

// relModule is the import specifier of module (relative to src/, without
// extension) from a file in folder dir (relative to src/).
func relModule(dir, module string) string {
	rel, err := filepath.Rel(filepath.FromSlash(dir), filepath.FromSlash(module))
	if err != nil {
		panic(err)
	}
	rel = filepath.ToSlash(rel)
	if !strings.HasPrefix(rel, ".") {
		rel = "./" + rel
	}
	return rel + ".js"
}

// typeResource is the version of r's kind whose type a controller of r
// reconciles: r itself, or, for a controller of a version the project does
// not define (--resource=false), the kind's first version with a type.
func typeResource(p *scaffold.Project, r *scaffold.Resource) (*scaffold.Resource, error) {
	if r.API {
		return r, nil
	}
	for _, k := range p.Kinds(r.Group, r.Kind) {
		if k.API {
			return k, nil
		}
	}
	return nil, fmt.Errorf("the project has no type of %s %s: run polyop create api with --resource", r.APIVersion(), r.Kind)
}

// CreateAPI writes the kind's module src/api/<version>/<kind>.ts (with
// --resource) and its reconciler src/controllers/<kind>.ts with a test
// (with --controller), registered in src/sidecar.ts.
func (Scaffolder) CreateAPI(w *scaffold.Writer, p *scaffold.Project, r *scaffold.Resource) error {
	if r.API {
		d := newResourceData(p, r)
		if err := w.RenderFile("src/"+apiModule(r)+".ts", templates, "kind.ts.tmpl", d); err != nil {
			return err
		}
	}
	if !r.Controller {
		return nil
	}
	t, err := typeResource(p, r)
	if err != nil {
		return err
	}
	d := newResourceData(p, t)
	d.APIFromParent = relModule("controllers", apiModule(t))
	base := "src/controllers/" + d.Lower
	if err := w.RenderFile(base+".ts", templates, "controller.ts.tmpl", d); err != nil {
		return err
	}
	if err := w.RenderFile(base+".test.ts", templates, "controller.test.ts.tmpl", d); err != nil {
		return err
	}
	if err := ensureKindImport(w, t); err != nil {
		return err
	}
	if err := w.Insert(sidecarFile, importsMarker, fmt.Sprintf("import { reconcile%s } from %q;", r.Kind, relModule(".", "controllers/"+d.Lower))); err != nil {
		return err
	}
	owns := ""
	if t.Namespaced {
		owns = `, owns: [{ apiVersion: "v1", kind: "ConfigMap" }]`
	}
	return w.Insert(sidecarFile, registerMarker, fmt.Sprintf("sidecar.reconciler({ for: %s%s }, reconcile%s);", d.Ident, owns, r.Kind))
}

// ensureKindImport imports the kind of r into src/sidecar.ts under its
// ident, unless it is already.
func ensureKindImport(w *scaffold.Writer, r *scaffold.Resource) error {
	line := fmt.Sprintf("import { %s as %s } from %q;", r.Kind, ident(r), relModule(".", apiModule(r)))
	return w.InsertOnce(sidecarFile, importsMarker, line)
}

// CreateWebhook writes, for what r.Webhooks asks, a defaulter
// (src/webhooks/<version>/<kind>-defaulter.ts), a validator
// (…-validator.ts) and a converter between the kind's versions
// (src/webhooks/<kind>-converter.ts), each with a test, registered in
// src/sidecar.ts.
func (Scaffolder) CreateWebhook(w *scaffold.Writer, p *scaffold.Project, r *scaffold.Resource) error {
	if r.Webhooks == nil {
		return errors.New("no webhook asked for")
	}
	d := newResourceData(p, r)
	dir := path.Join("webhooks", r.Version)
	d.APIFromParent = relModule(dir, apiModule(r))
	for _, h := range []struct {
		asked              bool
		name               string
		fn, method, option string
	}{
		{r.Webhooks.Defaulting, "defaulter", "default" + r.Kind, "defaulter", ""},
		{r.Webhooks.Validation, "validator", "validate" + r.Kind, "validator", ""},
	} {
		if !h.asked {
			continue
		}
		module := path.Join(dir, d.Lower+"-"+h.name)
		if err := w.RenderFile("src/"+module+".ts", templates, h.name+".ts.tmpl", d); err != nil {
			return err
		}
		if err := w.RenderFile("src/"+module+".test.ts", templates, h.name+".test.ts.tmpl", d); err != nil {
			return err
		}
		if err := ensureKindImport(w, r); err != nil {
			return err
		}
		alias := h.fn + strings.TrimPrefix(d.Ident, r.Kind)
		if err := w.Insert(sidecarFile, importsMarker, fmt.Sprintf("import { %s as %s } from %q;", h.fn, alias, relModule(".", module))); err != nil {
			return err
		}
		if err := w.Insert(sidecarFile, registerMarker, fmt.Sprintf("sidecar.%s({ for: %s }, %s);", h.method, d.Ident, alias)); err != nil {
			return err
		}
	}
	if !r.Webhooks.Conversion {
		return nil
	}
	if len(d.Versions) < 2 {
		return fmt.Errorf("conversion of %s needs two versions of it with a type (polyop create api --resource)", r.Kind)
	}
	for i := range d.Versions {
		d.Versions[i].Module = relModule("webhooks", d.Versions[i].Module)
	}
	module := path.Join("webhooks", d.Lower+"-converter")
	if err := w.RenderFile("src/"+module+".ts", templates, "converter.ts.tmpl", d); err != nil {
		return err
	}
	if err := w.RenderFile("src/"+module+".test.ts", templates, "converter.test.ts.tmpl", d); err != nil {
		return err
	}
	var versions []string
	for _, v := range d.Versions {
		versions = append(versions, fmt.Sprintf("%q", v.Version))
	}
	// The registration names the kind by one of its typed versions (only
	// its group and kind count): r's own, unless r has no type.
	t, err := typeResource(p, r)
	if err != nil {
		return err
	}
	if err := ensureKindImport(w, t); err != nil {
		return err
	}
	if err := w.Insert(sidecarFile, importsMarker, fmt.Sprintf("import { convert%s } from %q;", r.Kind, relModule(".", module))); err != nil {
		return err
	}
	return w.Insert(sidecarFile, registerMarker, fmt.Sprintf("sidecar.converter({ for: %s, versions: [%s] }, convert%s);",
		ident(t), strings.Join(versions, ", "), r.Kind))
}

// GenerateCRDs compiles the project (its Sidecar.Build, npm run build) and
// runs the SDK's polyop-crd on the compiled module of every kind, which
// writes <group>_<plural>.yaml, each kind's versions together, into
// scaffold.CRDDir.
func (Scaffolder) GenerateCRDs(ctx context.Context, p *scaffold.Project, root string, log io.Writer) error {
	var modules []string
	seen := map[string]bool{}
	for i := range p.Resources {
		r := &p.Resources[i]
		if m := "dist/" + apiModule(r) + ".js"; r.API && !seen[m] {
			seen[m] = true
			modules = append(modules, m)
		}
	}
	if len(modules) == 0 {
		fmt.Fprintln(log, "no kinds with types (polyop create api --resource): no CRDs to write")
		return nil
	}
	crd := filepath.Join(root, "node_modules", ".bin", "polyop-crd")
	if _, err := os.Stat(crd); err != nil {
		return fmt.Errorf("%s is missing: install the project's dependencies first (make setup, or npm install)", filepath.Join("node_modules", ".bin", "polyop-crd"))
	}
	if len(p.Sidecar.Build) > 0 {
		if err := scaffold.RunCommand(ctx, root, log, nil, p.Sidecar.Build[0], p.Sidecar.Build[1:]...); err != nil {
			return err
		}
	}
	return scaffold.RunCommand(ctx, root, log, nil, filepath.Join("node_modules", ".bin", "polyop-crd"), append(modules, "-o", scaffold.CRDDir)...)
}
