package typescript

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/testenv"
)

// newProject runs polyop init for TypeScript in a temporary folder and
// returns its root.
func newProject(t *testing.T, sdkSource string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fleet")
	if _, err := scaffold.Init(scaffold.InitOptions{
		Dir: dir, Language: scaffold.TypeScript, Domain: "example.com", Version: "0.1.0", SDKSource: sdkSource,
	}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func read(t *testing.T, root, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustContain(t *testing.T, path, content string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(content, w) {
			t.Errorf("%s does not contain %q:\n%s", path, w, content)
		}
	}
}

func TestInitWritesAnNPMPackageOnThePublishedSDK(t *testing.T) {
	root := newProject(t, "")
	var pkg struct {
		Name            string
		Type            string
		Scripts         map[string]string
		Dependencies    map[string]string
		DevDependencies map[string]string
	}
	if err := json.Unmarshal([]byte(read(t, root, "package.json")), &pkg); err != nil {
		t.Fatalf("package.json: %v", err)
	}
	if pkg.Name != "fleet" || pkg.Type != "module" {
		t.Errorf("package.json: name %q, type %q; want fleet, module", pkg.Name, pkg.Type)
	}
	if got := pkg.Dependencies["@polyop/sidecar"]; got != "0.1.0" {
		t.Errorf("package.json depends on @polyop/sidecar %q, want 0.1.0", got)
	}
	for _, script := range []string{"build", "test", "lint"} {
		if pkg.Scripts[script] == "" {
			t.Errorf("package.json has no %s script", script)
		}
	}
	// polyop is the project's own, at the SDK's version: npm run puts
	// node_modules/.bin first on PATH, as npx looks there first.
	if got := pkg.DevDependencies["@polyop/cli"]; got != "0.1.0" || got != pkg.Dependencies["@polyop/sidecar"] {
		t.Errorf("package.json's devDependencies have @polyop/cli %q, want 0.1.0, @polyop/sidecar's version", got)
	}
	if got := pkg.Scripts["generate"]; got != "polyop generate" {
		t.Errorf("package.json's generate script is %q, want polyop generate", got)
	}
	mustContain(t, "Makefile", read(t, root, "Makefile"), "\nPOLYOP ?= "+LocalPolyop+"\n")
	mustContain(t, "README.md", read(t, root, "README.md"), "`POLYOP` (default `"+LocalPolyop+"`", "[@polyop/cli](")
	p, _, err := scaffold.LoadProject(root)
	if err != nil {
		t.Fatal(err)
	}
	if p.Package != "fleet" || strings.Join(p.Sidecar.Command, " ") != "node dist/main.js" || strings.Join(p.Sidecar.Build, " ") != "npm run build" {
		t.Errorf("PROJECT: package %q, sidecar %+v", p.Package, p.Sidecar)
	}
	mustContain(t, "tsconfig.json", read(t, root, "tsconfig.json"), `"strict": true`, `"module": "NodeNext"`, `"outDir": "dist"`)
	mustContain(t, "src/sidecar.ts", read(t, root, "src/sidecar.ts"), importsMarker, registerMarker, `new Sidecar({ name: "fleet"`)
	mustContain(t, "src/main.ts", read(t, root, "src/main.ts"), `address: { type: "string"`,
		`.serve({ address: values.address, signal: shutdownSignal() });`) // one ServeOptions, no positional address
	mustContain(t, "Dockerfile", read(t, root, "Dockerfile"), "npm ci --omit=dev", "USER 65532:65532", "ARG NODE_IMAGE="+NodeImage)
	if strings.Contains(read(t, root, "Dockerfile"), "vendor") {
		t.Error("the Dockerfile of a project on the published SDK copies vendor/")
	}
	tasks := Scaffolder{}.Tasks(p)
	if strings.Join(tasks.Setup, "\n") != "npm install --no-audit --no-fund\ntouch "+Stamp || tasks.Stamp != Stamp {
		t.Errorf("Setup = %q, stamp %q", tasks.Setup, tasks.Stamp)
	}
	if tasks.Polyop != LocalPolyop {
		t.Errorf("Tasks.Polyop = %q, want %q", tasks.Polyop, LocalPolyop)
	}
}

func TestDefaultsRefusesAPackageNameNPMRefuses(t *testing.T) {
	for name, ok := range map[string]bool{"fleet": true, "@ship/fleet": true, "fleet.operator_2": true, "Fleet": false, "@ship/": false, "fl eet": false} {
		p := &scaffold.Project{Name: "fleet", Package: name}
		if err := (Scaffolder{}).Defaults(p); (err == nil) != ok {
			t.Errorf("package %q: %v, want ok %v", name, err, ok)
		}
	}
}

func TestSetupQuotesAnSDKSourceWithSpaces(t *testing.T) {
	setup := Scaffolder{}.Tasks(&scaffold.Project{SDKSource: "/home/a b/polyop", PolyopVersion: "0.1.0"}).Setup
	if want := "make -C '/home/a b/polyop' --no-print-directory dist-typescript"; setup[0] != want {
		t.Errorf("Setup[0] = %q, want %q", setup[0], want)
	}
}

func TestInitOfAPolyopWithoutAReleaseVersionAsksForSDKSource(t *testing.T) {
	_, err := scaffold.Init(scaffold.InitOptions{Dir: t.TempDir(), Name: "fleet", Language: scaffold.TypeScript, Domain: "example.com", Version: "dev"})
	if err == nil || !strings.Contains(err.Error(), "--sdk-source") {
		t.Errorf("init with polyop version dev: %v, want an error naming --sdk-source", err)
	}
}

func TestInitWithSDKSourceDependsOnTheSDKPackedFromTheCheckout(t *testing.T) {
	src := testenv.RepoRoot()
	root := newProject(t, src)
	mustContain(t, "package.json", read(t, root, "package.json"), `"@polyop/sidecar": "file:vendor/polyop-sidecar-`)
	mustContain(t, "Dockerfile", read(t, root, "Dockerfile"), "COPY vendor/ vendor/")
	// No @polyop/cli of the checkout's to depend on: polyop is the one on
	// PATH, the checkout's.
	if pkg := read(t, root, "package.json"); strings.Contains(pkg, "@polyop/cli") {
		t.Errorf("package.json of a project on a checkout's SDK depends on @polyop/cli:\n%s", pkg)
	}
	mustContain(t, "Makefile", read(t, root, "Makefile"), "\nPOLYOP ?= polyop\n")
	mustContain(t, "README.md", read(t, root, "README.md"), "`POLYOP` (default polyop)", "polyop is the one on your PATH")
	p, _, err := scaffold.LoadProject(root)
	if err != nil {
		t.Fatal(err)
	}
	if polyop := (Scaffolder{}).Tasks(p).Polyop; polyop != "" {
		t.Errorf("Tasks.Polyop = %q, want the polyop on PATH", polyop)
	}
	setup := strings.Join(Scaffolder{}.Tasks(p).Setup, "\n")
	mustContain(t, "Setup", setup, "make -C "+src+" --no-print-directory dist-typescript", "cp "+filepath.Join(src, "dist", "typescript", "polyop-sidecar-"),
		"npm install --no-audit --no-fund ./vendor/polyop-sidecar-")
	if strings.Contains(setup, "$") {
		t.Errorf("Setup has a $, which make and sh read apart:\n%s", setup)
	}
}

func TestCreateAPIAndWebhookRegisterAboveTheMarkers(t *testing.T) {
	root := newProject(t, "")
	for _, o := range []scaffold.APIOptions{
		{Group: "ship", Version: "v1", Kind: "Frigate", Namespaced: true, Resource: true, Controller: true},
		{Group: "ship", Version: "v1", Kind: "Harbor", Namespaced: false, Resource: true, Controller: true},
		{Group: "ship", Version: "v2", Kind: "Frigate", Namespaced: true, Resource: true},
	} {
		o.Dir = root
		if _, err := scaffold.CreateAPI(o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []scaffold.WebhookOptions{
		{Group: "ship", Version: "v1", Kind: "Frigate", Defaulting: true},
		{Group: "ship", Version: "v1", Kind: "Frigate", Validation: true},
		{Group: "ship", Version: "v1", Kind: "Frigate", Conversion: true},
	} {
		o.Dir = root
		if _, err := scaffold.CreateWebhook(o); err != nil {
			t.Fatal(err)
		}
	}

	sidecar := read(t, root, sidecarFile)
	want := []string{
		`import { Frigate as FrigateV1 } from "./api/v1/frigate.js";`,
		`import { reconcileFrigate } from "./controllers/frigate.js";`,
		`import { Harbor as HarborV1 } from "./api/v1/harbor.js";`,
		`import { reconcileHarbor } from "./controllers/harbor.js";`,
		`import { defaultFrigate as defaultFrigateV1 } from "./webhooks/v1/frigate-defaulter.js";`,
		`import { validateFrigate as validateFrigateV1 } from "./webhooks/v1/frigate-validator.js";`,
		`import { convertFrigate } from "./webhooks/frigate-converter.js";`,
		"// " + importsMarker,
		`sidecar.reconciler({ for: FrigateV1, owns: [{ apiVersion: "v1", kind: "ConfigMap" }] }, reconcileFrigate);`,
		`sidecar.reconciler({ for: HarborV1 }, reconcileHarbor);`,
		`sidecar.defaulter({ for: FrigateV1 }, defaultFrigateV1);`,
		`sidecar.validator({ for: FrigateV1 }, validateFrigateV1);`,
		`sidecar.converter({ for: FrigateV1, versions: ["v1", "v2"] }, convertFrigate);`,
		"// " + registerMarker,
	}
	at := 0
	for _, w := range want {
		i := strings.Index(sidecar[at:], w)
		if i < 0 {
			t.Fatalf("src/sidecar.ts has no %q after offset %d (the lines in order):\n%s", w, at, sidecar)
		}
		at += i + len(w)
	}
	if n := strings.Count(sidecar, "as FrigateV1 }"); n != 1 {
		t.Errorf("src/sidecar.ts imports FrigateV1 %d times, want once:\n%s", n, sidecar)
	}

	v1, v2 := read(t, root, "src/api/v1/frigate.ts"), read(t, root, "src/api/v2/frigate.ts")
	mustContain(t, "src/api/v1/frigate.ts", v1, `group: "ship.example.com"`, `version: "v1"`, `plural: "frigates"`, `scope: "Namespaced"`,
		"status: FrigateStatus", `jsonPath: '.status.conditions[?(@.type=="Ready")].status'`)
	if strings.Contains(v1, "storage") {
		t.Errorf("the first version is not the stored one:\n%s", v1)
	}
	mustContain(t, "src/api/v2/frigate.ts", v2, `version: "v2"`, "storage: false")
	mustContain(t, "src/api/v1/harbor.ts", read(t, root, "src/api/v1/harbor.ts"), `scope: "Cluster"`)

	mustContain(t, "src/controllers/frigate.ts", read(t, root, "src/controllers/frigate.ts"),
		`import type { Frigate } from "../api/v1/frigate.js";`, "reconcileFrigate(frigate: Received<Frigate>): Result {", "data: { message: frigate.spec.message ?? \"\" }", `reason: "Reconciled"`,
		"frigate.status.observedGeneration = frigate.metadata.generation;")
	harbor := read(t, root, "src/controllers/harbor.ts")
	if strings.Contains(harbor, "ConfigMap =") {
		t.Errorf("the cluster-scoped Harbor desires a ConfigMap:\n%s", harbor)
	}
	// A validator returns warnings and refuses by throwing DeniedError; the
	// handlers take the Received objects the SDK hands them.
	mustContain(t, "src/webhooks/v1/frigate-validator.ts", read(t, root, "src/webhooks/v1/frigate-validator.ts"),
		`throw new DeniedError("", [field.tooLongCharacters("spec.message", message, maxMessageLength)]);`, "maxMessageLength = 64",
		"(frigate: Received<Frigate>, ctx: AdmissionContext<Frigate>): string[] {")
	mustContain(t, "src/webhooks/v1/frigate-defaulter.ts", read(t, root, "src/webhooks/v1/frigate-defaulter.ts"),
		`defaultMessage = "`+scaffold.SampleMessage+`"`, "(frigate: Received<Frigate>): void {")
	mustContain(t, "src/webhooks/frigate-converter.ts", read(t, root, "src/webhooks/frigate-converter.ts"),
		`import { Frigate as FrigateV2 } from "../api/v2/frigate.js";`, "[FrigateV1.apiVersion, FrigateV2.apiVersion]")
	for _, test := range []string{"src/controllers/frigate.test.ts", "src/controllers/harbor.test.ts", "src/webhooks/v1/frigate-defaulter.test.ts",
		"src/webhooks/v1/frigate-validator.test.ts", "src/webhooks/frigate-converter.test.ts"} {
		mustContain(t, test, read(t, root, test), "new Harness(newSidecar(")
	}
}

func TestAKindNamedLikeAReservedWordGetsAVariableOfItsOwn(t *testing.T) {
	root := newProject(t, "")
	if _, err := scaffold.CreateAPI(scaffold.APIOptions{Dir: root, Group: "ship", Version: "v1", Kind: "Default", Namespaced: true, Resource: true, Controller: true}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "src/controllers/default.ts", read(t, root, "src/controllers/default.ts"), "export function reconcileDefault(defaultObj: Received<Default>): Result {")
}

func TestGenerateCRDsAsksForTheDependenciesFirst(t *testing.T) {
	root := newProject(t, "")
	if _, err := scaffold.CreateAPI(scaffold.APIOptions{Dir: root, Group: "ship", Version: "v1", Kind: "Frigate", Namespaced: true, Resource: true}); err != nil {
		t.Fatal(err)
	}
	err := scaffold.Generate(t.Context(), root, os.Stderr)
	if err == nil || !strings.Contains(err.Error(), "npm install") {
		t.Errorf("generate without node_modules: %v, want an error naming npm install", err)
	}
}

// The versions a project pins are this repository's, which its own tests
// run with.
func TestThePinnedVersionsAreTheRepositorys(t *testing.T) {
	root := testenv.RepoRoot()
	var rootPkg, sdkPkg struct{ Dependencies, DevDependencies map[string]string }
	for path, v := range map[string]any{"package.json": &rootPkg, "sdk/typescript/package.json": &sdkPkg} {
		if err := json.Unmarshal([]byte(read(t, root, path)), v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	for _, c := range []struct{ name, got, want string }{
		{"typescript", TypeScriptVersion, rootPkg.DevDependencies["typescript"]},
		{"@types/node", NodeTypesVersion, rootPkg.DevDependencies["@types/node"]},
		{"@sinclair/typebox", TypeBoxVersion, sdkPkg.Dependencies["@sinclair/typebox"]},
	} {
		if c.got != c.want {
			t.Errorf("a project pins %s %s, the repository %s", c.name, c.got, c.want)
		}
	}
	mustContain(t, "examples/typescript/configmapsync/Dockerfile", read(t, root, "examples/typescript/configmapsync/Dockerfile"), "ARG NODE_IMAGE="+NodeImage+"\n")
}
