package python

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/scaffold"
)

// newProject runs polyop init for a Python project named frigates in a
// temporary folder and returns its root.
func newProject(t *testing.T, o scaffold.InitOptions) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "frigates")
	o.Dir, o.Language, o.Domain = root, scaffold.Python, "example.com"
	if o.Version == "" {
		o.Version = "0.1.0"
	}
	if _, err := scaffold.Init(o); err != nil {
		t.Fatalf("init: %v", err)
	}
	return root
}

func read(t *testing.T, root, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func createAPI(t *testing.T, root, version, kind string, namespaced, resource, controller bool) {
	t.Helper()
	if _, err := scaffold.CreateAPI(scaffold.APIOptions{
		Dir: root, Group: "ship", Version: version, Kind: kind,
		Namespaced: namespaced, Resource: resource, Controller: controller,
	}); err != nil {
		t.Fatalf("create api %s %s: %v", version, kind, err)
	}
}

// compiles checks that every Python file of the project compiles, when a
// python3 is at hand.
func compiles(t *testing.T, root string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Log("no python3: the files are not compiled")
		return
	}
	out, err := exec.Command(python, "-m", "compileall", "-q", filepath.Join(root, "src"), filepath.Join(root, "tests")).CombinedOutput()
	if err != nil {
		t.Errorf("python3 -m compileall: %v\n%s", err, out)
	}
}

func TestDefaultsMakeThePackageFromTheProjectName(t *testing.T) {
	for name, tc := range map[string]struct {
		project, pkg string
		wantPkg      string
		wantErr      string
	}{
		"if no package is given, then the project name with underscores is": {project: "sea-ships", wantPkg: "sea_ships"},
		"if a package is given, then it is kept":                            {project: "sea-ships", pkg: "fleet", wantPkg: "fleet"},
		"if the project name starts with a digit, then --package is asked":  {project: "7seas", wantErr: "pass --package"},
		"if the package is a keyword, then it is refused":                   {project: "x", pkg: "class", wantErr: "keyword"},
		"if the package would hide the SDK, then it is refused":             {project: "x", pkg: "polyop", wantErr: "hide"},
	} {
		t.Run(name, func(t *testing.T) {
			p := &scaffold.Project{Name: tc.project, Package: tc.pkg}
			err := Scaffolder{}.Defaults(p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Defaults: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Package != tc.wantPkg {
				t.Errorf("package %q, want %q", p.Package, tc.wantPkg)
			}
			if want := []string{".venv/bin/python", "-m", tc.wantPkg}; !slices.Equal(p.Sidecar.Command, want) {
				t.Errorf("sidecar command %q, want %q", p.Sidecar.Command, want)
			}
		})
	}
}

func TestInitWritesAPackageWithMarkersAndATest(t *testing.T) {
	root := newProject(t, scaffold.InitOptions{})

	for _, f := range []string{"src/frigates/__main__.py", "src/frigates/py.typed", "tests/test_sidecar.py", "Dockerfile", ".gitignore", ".dockerignore"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	pyproject := read(t, root, "pyproject.toml")
	for _, want := range []string{`name = "frigates"`, `"polyop==0.1.0"`, `requires-python = ">=3.10"`, `"pytest==` + pytestVersion + `"`, "\n[[tool.mypy.overrides]]\n"} {
		if !strings.Contains(pyproject, want) {
			t.Errorf("pyproject.toml has no %q:\n%s", want, pyproject)
		}
	}
	sidecar := read(t, root, "src/frigates/sidecar.py")
	for _, marker := range []string{"# " + importsMarker, "    # " + setupMarker, `NAME = "frigates"`} {
		if !strings.Contains(sidecar, marker) {
			t.Errorf("sidecar.py has no %q:\n%s", marker, sidecar)
		}
	}
	if docker := read(t, root, "Dockerfile"); strings.Contains(docker, sdkWheels) || !strings.Contains(docker, `"-m", "frigates"`) {
		t.Errorf("Dockerfile without --sdk-source:\n%s", docker)
	}
	compiles(t, root)
}

func TestTasksInstallTheSDKFromTheSourceFirst(t *testing.T) {
	checkout, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	published := Scaffolder{}.Tasks(&scaffold.Project{Package: "frigates"})
	local := Scaffolder{}.Tasks(&scaffold.Project{Package: "frigates", SDKSource: checkout})

	if got := strings.Join(published.Setup, "\n"); strings.Contains(got, "wheel") {
		t.Errorf("setup without --sdk-source builds a wheel:\n%s", got)
	}
	setup := strings.Join(local.Setup, "\n")
	wheel := strings.Index(setup, "pip wheel --no-deps --wheel-dir dist/sdk "+checkout+"/sdk/python")
	project := strings.Index(setup, "pip install -e '.[dev]'")
	if wheel < 0 || project < wheel {
		t.Errorf("setup with --sdk-source does not build the SDK's wheel before installing the project:\n%s", setup)
	}
	if last := local.Setup[len(local.Setup)-1]; last != "touch "+local.Stamp {
		t.Errorf("setup ends with %q, not with making its stamp %s", last, local.Stamp)
	}
	if !strings.Contains(strings.Join(local.Lint, "\n"), "mypy --strict src tests") {
		t.Errorf("lint: %q", local.Lint)
	}
	if !strings.Contains(published.Readme, "`src/frigates/sidecar.py`") || strings.Contains(published.Readme, "--sdk-source") {
		t.Errorf("the README section without --sdk-source:\n%s", published.Readme)
	}
	if !strings.Contains(local.Readme, "the checkout at `"+checkout+"`") {
		t.Errorf("the README section with --sdk-source does not name the checkout:\n%s", local.Readme)
	}
}

func TestTheSDKRequirement(t *testing.T) {
	checkout, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile(filepath.Join(checkout, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		p    scaffold.Project
		want string
	}{
		"if polyop is a release, then the SDK of that release":                   {scaffold.Project{PolyopVersion: "0.2.0"}, "polyop==0.2.0"},
		"if the release has a v, then without it":                                {scaffold.Project{PolyopVersion: "v0.2.0rc1"}, "polyop==0.2.0rc1"},
		"if polyop is a dev build with a source, then the source's version":      {scaffold.Project{PolyopVersion: "dev", SDKSource: checkout}, "polyop==" + strings.TrimSpace(string(version))},
		"if polyop is a dev build without a source, then any version of the SDK": {scaffold.Project{PolyopVersion: "dev"}, "polyop"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := sdkRequirement(&tc.p); got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

func TestCreateAPIRegistersEachKindAtTheMarkers(t *testing.T) {
	root := newProject(t, scaffold.InitOptions{})
	createAPI(t, root, "v1", "Frigate", true, true, true)
	createAPI(t, root, "v1", "HarborMaster", false, true, true)

	sidecar := read(t, root, "src/frigates/sidecar.py")
	for _, want := range []string{
		"from frigates.controllers import frigate as frigate_controller\nfrom frigates.controllers import harbor_master as harbor_master_controller\n# " + importsMarker,
		"    frigate_controller.setup(sidecar)\n    harbor_master_controller.setup(sidecar)\n    # " + setupMarker,
	} {
		if !strings.Contains(sidecar, want) {
			t.Errorf("sidecar.py has no\n%s\nin:\n%s", want, sidecar)
		}
	}

	frigate := read(t, root, "src/frigates/api/v1/frigate.py")
	for _, want := range []string{"class Frigate(crd.Resource):", `group="ship.example.com"`, `plural="frigates"`, "storage=True", "message: str | None = None", `crd.PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status', "string")`} {
		if !strings.Contains(frigate, want) {
			t.Errorf("api/v1/frigate.py has no %q:\n%s", want, frigate)
		}
	}
	if harbor := read(t, root, "src/frigates/api/v1/harbor_master.py"); !strings.Contains(harbor, `scope="Cluster"`) || !strings.Contains(harbor, `plural="harbormasters"`) {
		t.Errorf("a cluster-scoped kind:\n%s", harbor)
	}

	if controller := read(t, root, "src/frigates/controllers/frigate.py"); !strings.Contains(controller, `owns=["v1/ConfigMap"]`) || !strings.Contains(controller, `"data": {"message": frigate.spec.message or ""}`) {
		t.Errorf("the namespaced kind's controller declares no ConfigMap:\n%s", controller)
	}
	if controller := read(t, root, "src/frigates/controllers/harbor_master.py"); strings.Contains(controller, "ConfigMap") {
		t.Errorf("the cluster-scoped kind's controller declares a ConfigMap:\n%s", controller)
	}
	if test := read(t, root, "tests/test_harbor_master.py"); !strings.Contains(test, "test_reconcile_declares_no_child") {
		t.Errorf("the cluster-scoped kind's test:\n%s", test)
	}
	compiles(t, root)
}

func TestAControllerWithoutItsTypeTakesTheFirstVersionsModel(t *testing.T) {
	root := newProject(t, scaffold.InitOptions{})
	createAPI(t, root, "v1", "Frigate", true, true, false)
	createAPI(t, root, "v2", "Frigate", true, false, true)

	if controller := read(t, root, "src/frigates/controllers/frigate.py"); !strings.Contains(controller, "from frigates.api.v1.frigate import Frigate") {
		t.Errorf("the controller of v2 without --resource:\n%s", controller)
	}
	if _, err := os.Stat(filepath.Join(root, "src/frigates/api/v2")); err == nil {
		t.Error("create api --resource=false wrote api/v2")
	}
}

func TestCreateWebhookWritesAdmissionAndConversion(t *testing.T) {
	root := newProject(t, scaffold.InitOptions{})
	createAPI(t, root, "v1", "Frigate", true, true, true)
	createAPI(t, root, "v1alpha1", "Frigate", true, true, false)

	if _, err := scaffold.CreateWebhook(scaffold.WebhookOptions{Dir: root, Group: "ship", Version: "v1", Kind: "Frigate", Defaulting: true}); err != nil {
		t.Fatal(err)
	}
	webhooks := read(t, root, "src/frigates/webhooks/frigate_v1.py")
	if !strings.Contains(webhooks, "sidecar.defaulter(KIND)(default)") || strings.Contains(webhooks, "validator") {
		t.Errorf("a defaulting webhook:\n%s", webhooks)
	}
	// Validation later rewrites the module with both, and registers it once.
	if _, err := scaffold.CreateWebhook(scaffold.WebhookOptions{Dir: root, Group: "ship", Version: "v1", Kind: "Frigate", Validation: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	webhooks = read(t, root, "src/frigates/webhooks/frigate_v1.py")
	for _, want := range []string{"sidecar.defaulter(KIND)(default)", "sidecar.validator(KIND)(validate)", "MAX_MESSAGE_LENGTH = 64", `DEFAULT_MESSAGE = "Hello from polyop"`, `"spec.message",`, "polyop.FieldErrorType.TOO_LONG"} {
		if !strings.Contains(webhooks, want) {
			t.Errorf("webhooks/frigate_v1.py has no %q:\n%s", want, webhooks)
		}
	}
	if _, err := scaffold.CreateWebhook(scaffold.WebhookOptions{Dir: root, Group: "ship", Version: "v1", Kind: "Frigate", Conversion: true}); err != nil {
		t.Fatal(err)
	}
	sidecar := read(t, root, "src/frigates/sidecar.py")
	if n := strings.Count(sidecar, "frigate_v1_webhooks.setup(sidecar)"); n != 1 {
		t.Errorf("the webhooks are set up %d times:\n%s", n, sidecar)
	}
	if !strings.Contains(sidecar, "from frigates.webhooks import frigate_conversion\n") || !strings.Contains(sidecar, "frigate_conversion.setup(sidecar)") {
		t.Errorf("the conversion is not registered:\n%s", sidecar)
	}
	conversion := read(t, root, "src/frigates/webhooks/frigate_conversion.py")
	for _, want := range []string{"from frigates.api.v1 import frigate as v1\nfrom frigates.api.v1alpha1 import frigate as v1alpha1\n", "crd.kind_info(v1alpha1.Frigate).api_version: v1alpha1.Frigate,", "info = crd.kind_info(v1.Frigate)"} {
		if !strings.Contains(conversion, want) {
			t.Errorf("webhooks/frigate_conversion.py has no %q:\n%s", want, conversion)
		}
	}
	if test := read(t, root, "tests/test_frigate_conversion.py"); !strings.Contains(test, `== ["v1", "v1alpha1"]`) {
		t.Errorf("the conversion's test:\n%s", test)
	}
	if second := read(t, root, "src/frigates/api/v1alpha1/frigate.py"); !strings.Contains(second, "storage=False") {
		t.Errorf("the second version is a storage version:\n%s", second)
	}
	compiles(t, root)
}

func TestGenerateWithoutAVirtualenvNamesTheRemedy(t *testing.T) {
	root := newProject(t, scaffold.InitOptions{})
	createAPI(t, root, "v1", "Frigate", true, true, true)

	err := scaffold.Generate(context.Background(), root, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "make manifests") || !strings.Contains(err.Error(), "python3 -m venv .venv") {
		t.Fatalf("generate without .venv: %v, want an error naming make manifests and the setup commands", err)
	}
}
