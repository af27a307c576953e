package packaging_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/testenv"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// dist is what `make release` built for this machine's platform, once for
// every test of the package: the SDKs' packages (what `make dist` builds)
// among the rest.
type dist struct {
	dir        string // DIST_DIR
	version    string // the VERSION file's
	wheelhouse string // the wheels of the Python SDK's dependencies
}

var (
	distOnce sync.Once
	built    dist
	distErr  error
	distTmp  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if distTmp != "" {
		_ = os.RemoveAll(distTmp)
	}
	os.Exit(code)
}

// buildDist runs `make release python-wheelhouse` for this machine's
// platform only (PLATFORMS=GOOS/GOARCH) into a temporary DIST_DIR, once.
func buildDist(t *testing.T) dist {
	t.Helper()
	distOnce.Do(func() {
		distTmp, distErr = os.MkdirTemp("", "polyop-dist-")
		if distErr != nil {
			return
		}
		built.dir = filepath.Join(distTmp, "dist")
		built.version, distErr = projectVersion()
		if distErr != nil {
			return
		}
		// Other test binaries compile the TypeScript SDK too (the
		// examples reference it): build it under their lock first, so
		// that make's tsc -b finds it up to date and writes nothing.
		if distErr = testenv.BuildTypeScript("sdk/typescript"); distErr != nil {
			return
		}
		start := time.Now()
		if _, distErr = run(root, "make", "--no-print-directory", "release", "python-wheelhouse",
			"PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH, "DIST_DIR="+built.dir); distErr != nil {
			return
		}
		t.Logf("make release for %s/%s: %s", runtime.GOOS, runtime.GOARCH, time.Since(start).Round(time.Second))
		built.wheelhouse, distErr = pythonWheelhouse()
	})
	if distErr != nil {
		t.Fatalf("make release: %v", distErr)
	}
	return built
}

// pythonWheelhouse is the folder of the wheels `make python-wheelhouse`
// downloads, absolute.
func pythonWheelhouse() (string, error) {
	out, err := run(root, "make", "--no-print-directory", "print-PYTHON_WHEELHOUSE")
	if err != nil {
		return "", err
	}
	return filepath.Abs(filepath.Join(root, strings.TrimSpace(out)))
}

// run runs a command in dir and returns its standard output; the error holds
// its standard error.
func run(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s in %s: %w\n%s%s", name, strings.Join(args, " "), dir, err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func mustRun(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	out, err := run(dir, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func projectVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// outsideRepository returns a temporary directory and fails the test if it is
// inside the repository, where a parent's package.json, pyproject.toml or
// node_modules could stand in for what the artefact lacks.
func outsideRepository(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := filepath.Rel(abs, dir); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the temporary directory %s is inside the repository", dir)
	}
	return dir
}

func TestEverySDKHasTheProjectVersion(t *testing.T) {
	version, err := projectVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(version) {
		t.Fatalf("VERSION holds %q, not a version such as 1.2.3", version)
	}
	// Each SDK's own tests check that its other copies of the version agree
	// with these (sdk/python/tests/test_sidecar.py, sdk/typescript/src/sidecar.test.ts).
	declared := map[string]func() (string, error){
		"sdk/go/sidecar.SDKVersion": func() (string, error) { return sidecar.SDKVersion, nil },
		"sdk/python/pyproject.toml": func() (string, error) {
			return find("sdk/python/pyproject.toml", `(?m)^version = "([^"]*)"`)
		},
		"sdk/python/src/polyop/_version.py": func() (string, error) {
			return find("sdk/python/src/polyop/_version.py", `(?m)^__version__ = "([^"]*)"`)
		},
		"sdk/typescript/package.json": func() (string, error) {
			b, err := os.ReadFile(filepath.Join(root, "sdk/typescript/package.json"))
			if err != nil {
				return "", err
			}
			var pkg struct{ Version string }
			err = json.Unmarshal(b, &pkg)
			return pkg.Version, err
		},
	}
	for where, get := range declared {
		got, err := get()
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		if got != version {
			t.Errorf("%s says version %q, the VERSION file %q: bump every SDK together", where, got, version)
		}
	}
}

// find returns the first group of pattern in the file at path (from the root).
func find(path, pattern string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(pattern).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("no match for %s", pattern)
	}
	return string(m[1]), nil
}

const pythonSidecar = `import pathlib
import sys

import polyop
from polyop.testing import Harness

# The SDK comes from the virtualenv, not from a checkout.
assert pathlib.Path(polyop.__file__).resolve().is_relative_to(pathlib.Path(sys.prefix).resolve()), polyop.__file__

sidecar = polyop.Sidecar("packaged")


@sidecar.reconciler("example.com/v1/Widget")
def reconcile(widget: polyop.Object, ctx: polyop.Context) -> None:
    widget.status["seen"] = widget.spec["size"]


harness = Harness(sidecar)
description = harness.describe()
reconciled = harness.reconcile(
    {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"namespace": "default", "name": "a"}, "spec": {"size": 3}}
)
assert reconciled.status is not None
print(description.sdk_name, description.sdk_version, [c.name for c in description.controllers], reconciled.status["seen"])
`

func TestThePythonWheelInstallsIntoAFreshVirtualenv(t *testing.T) {
	d := buildDist(t)
	wheel := filepath.Join(d.dir, "python", "polyop-"+d.version+"-py3-none-any.whl")
	if _, err := os.Stat(filepath.Join(d.dir, "python", "polyop-"+d.version+".tar.gz")); err != nil {
		t.Errorf("no sdist: %v", err)
	}

	zr, err := zip.OpenReader(wheel)
	if err != nil {
		t.Fatalf("the wheel: %v", err)
	}
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		files[f.Name] = f
	}
	for _, want := range []string{"polyop/__init__.py", "polyop/py.typed", "polyop/testing.py",
		"polyop/v1alpha1/sidecar_pb2.py", "polyop/v1alpha1/sidecar_pb2.pyi", "polyop/v1alpha1/sidecar_pb2_grpc.py"} {
		if files[want] == nil {
			t.Errorf("the wheel has no %s", want)
		}
	}
	for name := range files {
		if strings.HasPrefix(name, "tests/") {
			t.Errorf("the wheel holds a test: %s", name)
		}
	}
	metadata := files["polyop-"+d.version+".dist-info/METADATA"]
	if metadata == nil {
		t.Fatal("the wheel has no METADATA")
	}
	rc, err := metadata.Open()
	if err != nil {
		t.Fatal(err)
	}
	var meta bytes.Buffer
	_, err = meta.ReadFrom(rc)
	_ = rc.Close()
	_ = zr.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range []string{"grpcio", "grpcio-health-checking", "grpcio-reflection", "grpcio-status", "protobuf", "opentelemetry-api", "orjson"} {
		if !regexp.MustCompile(`(?m)^Requires-Dist: ` + regexp.QuoteMeta(dep) + `[<>=!~,. 0-9]*>=[0-9]`).Match(meta.Bytes()) {
			t.Errorf("the wheel does not require %s with a lower bound:\n%s", dep, meta.String())
		}
	}

	// A virtualenv of the interpreter .venv is made from (the wheelhouse
	// holds wheels for its version), with nothing but the wheel and what it
	// requires.
	dir := outsideRepository(t)
	venv := filepath.Join(dir, "venv")
	python, err := filepath.Abs(filepath.Join(root, ".venv", "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, dir, python, "-m", "venv", venv)
	mustRun(t, dir, filepath.Join(venv, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check",
		"--no-index", "--find-links", d.wheelhouse, wheel)
	mustRun(t, dir, filepath.Join(venv, "bin", "pip"), "check", "--disable-pip-version-check")
	if err := os.WriteFile(filepath.Join(dir, "widget.py"), []byte(pythonSidecar), 0o600); err != nil {
		t.Fatal(err)
	}
	// The wheel's py.typed and stubs give a user's mypy the SDK's types: the
	// repository's mypy checks the script strictly against the virtualenv.
	mypy, err := filepath.Abs(filepath.Join(root, ".venv", "bin", "mypy"))
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, dir, mypy, "--strict", "--no-incremental", "--python-executable", filepath.Join(venv, "bin", "python"), "widget.py")
	// -I: no PYTHONPATH, no user site, not the script's directory.
	out := mustRun(t, dir, filepath.Join(venv, "bin", "python"), "-I", "widget.py")
	if got, want := strings.TrimSpace(out), "polyop-python "+d.version+" ['widget'] 3"; got != want {
		t.Errorf("the sidecar printed %q, want %q", got, want)
	}
}

const tsSidecar = `import { SDK_NAME, SDK_VERSION, Sidecar, type KubeObject } from "@polyop/sidecar";
import { Harness } from "@polyop/sidecar/testing";

type Widget = KubeObject<{ size: number }, { seen?: number }>;

const sidecar = new Sidecar({ name: "packaged" });
sidecar.reconciler<Widget>({ for: { apiVersion: "example.com/v1", kind: "Widget" } }, (widget) => {
  widget.status = { seen: widget.spec.size };
  return {};
});

const description = sidecar.describe();
const reconciled = await new Harness(sidecar).reconcile<Widget>({
  apiVersion: "example.com/v1",
  kind: "Widget",
  metadata: { namespace: "default", name: "a" },
  spec: { size: 3 },
});
const seen: number | undefined = reconciled.status?.seen;
console.log(SDK_NAME, SDK_VERSION, description.controllers.map((c) => c.name).join(","), seen);
`

// tsConfig is strict, with the module system Node.js runs, and checks the
// declarations the package ships (skipLibCheck off).
const tsConfig = `{
  "compilerOptions": {
    "target": "ES2022",
    "module": "nodenext",
    "moduleResolution": "nodenext",
    "types": ["node"],
    "strict": true,
    "noUncheckedIndexedAccess": true,
    "exactOptionalPropertyTypes": true,
    "verbatimModuleSyntax": true,
    "skipLibCheck": false,
    "outDir": "out"
  },
  "files": ["widget.ts"]
}
`

func TestTheNPMTarballInstallsIntoAStrictTypeScriptProject(t *testing.T) {
	d := buildDist(t)
	tarball := filepath.Join(d.dir, "typescript", "polyop-sidecar-"+d.version+".tgz")
	listing := mustRun(t, ".", "tar", "-tzf", tarball)
	files := map[string]bool{}
	for _, name := range strings.Fields(listing) {
		files[name] = true
		if strings.Contains(name, ".test.") || strings.Contains(name, ".testutil.") || strings.HasSuffix(name, ".tsbuildinfo") {
			t.Errorf("the tarball holds %s", name)
		}
	}
	for _, want := range []string{"package/package.json", "package/README.md", "package/dist/index.js", "package/dist/index.d.ts",
		"package/dist/testing.js", "package/dist/testing.d.ts", "package/dist/gen/polyop/v1alpha1/sidecar_pb.js"} {
		if !files[want] {
			t.Errorf("the tarball has no %s", want)
		}
	}

	// The project's own pins of TypeScript and Node.js's types, which npm
	// ci has put in npm's cache.
	var rootPkg struct{ DevDependencies map[string]string }
	b, err := os.ReadFile(filepath.Join(root, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rootPkg); err != nil {
		t.Fatal(err)
	}
	dir := outsideRepository(t)
	for name, content := range map[string]string{
		"package.json":  `{"name": "widget-operator", "private": true, "type": "module"}` + "\n",
		"tsconfig.json": tsConfig,
		"widget.ts":     tsSidecar,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, dir, "npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "--ignore-scripts",
		tarball, "typescript@"+rootPkg.DevDependencies["typescript"], "@types/node@"+rootPkg.DevDependencies["@types/node"])
	mustRun(t, dir, filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", ".")
	out := mustRun(t, dir, "node", filepath.Join("out", "widget.js"))
	if got, want := strings.TrimSpace(out), "polyop-typescript "+d.version+" widget 3"; got != want {
		t.Errorf("the sidecar printed %q, want %q", got, want)
	}
}
