package packaging_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// platformTags are the wheel platform tags a release gives each platform's
// wheel (sdk/python/hatch_build.py makes them): the binary is static, so one
// Linux wheel serves glibc and musl; Go builds for macOS 12 or later.
var platformTags = map[string]string{
	"linux/amd64":  "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64",
	"linux/arm64":  "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64",
	"darwin/amd64": "macosx_12_0_x86_64",
	"darwin/arm64": "macosx_12_0_arm64",
}

// TestThePythonWheelsInstallPolyop takes this machine's platform wheel, the
// pure wheel and the sdist that `make release` built (buildDist), and
// installs the wheels into fresh virtualenvs as a
// user's pip does: the platform wheel's polyop is the binary itself, the pure
// wheel's says how to get it.
func TestThePythonWheelsInstallPolyop(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	if platformTags[platform] == "" {
		t.Skipf("a release has no wheel for %s", platform)
	}
	version, err := projectVersion()
	if err != nil {
		t.Fatal(err)
	}
	rel := buildDist(t)
	dist, wheelhouse := rel.dir, rel.wheelhouse
	pythonDist := filepath.Join(dist, "python")
	for _, name := range []string{"polyop-" + version + "-py3-none-any.whl", "polyop-" + version + ".tar.gz"} {
		if _, err := os.Stat(filepath.Join(pythonDist, name)); err != nil {
			t.Errorf("release-python built no %s beside the platform wheel: %v", name, err)
		}
	}

	// virtualenv makes a virtualenv in a directory of its own, of the
	// interpreter .venv is made from (the wheelhouse holds wheels for its
	// version), and pip installs what into it from the release's Python
	// folder and the wheelhouse alone.
	virtualenv := func(t *testing.T, what string) (dir, venv string) {
		t.Helper()
		dir = outsideRepository(t)
		venv = filepath.Join(dir, "venv")
		interpreter, err := filepath.Abs(filepath.Join(root, ".venv", "bin", "python"))
		if err != nil {
			t.Fatal(err)
		}
		mustRun(t, dir, interpreter, "-m", "venv", venv)
		mustRun(t, dir, filepath.Join(venv, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check",
			"--no-index", "--find-links", pythonDist, "--find-links", wheelhouse, what)
		mustRun(t, dir, filepath.Join(venv, "bin", "pip"), "check", "--disable-pip-version-check")
		return dir, venv
	}

	t.Run("the platform wheel carries the binary, which pip installs as the virtualenv's polyop", func(t *testing.T) {
		wheel := filepath.Join(pythonDist, "polyop-"+version+"-py3-none-"+platformTags[platform]+".whl")
		zr, err := zip.OpenReader(wheel)
		if err != nil {
			t.Fatalf("the platform wheel: %v", err)
		}
		defer func() { _ = zr.Close() }()
		files := map[string]*zip.File{}
		for _, f := range zr.File {
			files[f.Name] = f
		}
		wheelFile := readZipFile(t, files, "polyop-"+version+".dist-info/WHEEL")
		wantWheel := []string{"Root-Is-Purelib: false"}
		for _, platformTag := range strings.Split(platformTags[platform], ".") {
			wantWheel = append(wantWheel, "Tag: py3-none-"+platformTag)
		}
		for _, line := range wantWheel {
			if !strings.Contains(wheelFile, line+"\n") {
				t.Errorf("the wheel's WHEEL has no %q:\n%s", line, wheelFile)
			}
		}
		for _, want := range []string{"polyop/__init__.py", "polyop/py.typed", "polyop/v1alpha1/sidecar_pb2.pyi"} {
			if files[want] == nil {
				t.Errorf("the platform wheel has no %s", want)
			}
		}
		script := files["polyop-"+version+".data/scripts/polyop"]
		if script == nil {
			t.Fatalf("the platform wheel has no polyop-%s.data/scripts/polyop", version)
		}
		if script.Mode()&0o111 == 0 {
			t.Errorf("the wheel's polyop has mode %v, not executable", script.Mode())
		}
		info, err := os.Stat(wheel)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.1f MB", filepath.Base(wheel), float64(info.Size())/1e6)
		if info.Size() > npmSizeBudget {
			t.Errorf("%s is %.1f MB, over the %d MB a package should stay under: see docs/releasing.md, What the binary is made of",
				filepath.Base(wheel), float64(info.Size())/1e6, npmSizeBudget/1000/1000)
		}
		binary := filepath.Join(dist, "bin", "polyop-"+strings.ReplaceAll(platform, "/", "-"))
		if sha256Of(t, script.Open) != sha256Of(t, func() (io.ReadCloser, error) { return os.Open(binary) }) {
			t.Errorf("the wheel's polyop is not %s", binary)
		}

		// pip picks the platform's wheel over the pure one beside it.
		dir, venv := virtualenv(t, "polyop=="+version)
		polyop := filepath.Join(venv, "bin", "polyop")
		if fileHead(t, polyop, 2) == "#!" {
			t.Errorf("the virtualenv's polyop is a script, not the binary:\n%s", mustRun(t, dir, "head", "-n", "5", polyop))
		}
		want := "polyop:     " + version
		if out := mustRun(t, dir, polyop, "version"); firstLine(out) != want {
			t.Errorf("polyop version printed %q first, want %q (the VERSION file's):\n%s", firstLine(out), want, out)
		}
		python := filepath.Join(venv, "bin", "python")
		if out := mustRun(t, dir, python, "-I", "-c", "import polyop; print(polyop.__version__)"); strings.TrimSpace(out) != version {
			t.Errorf("import polyop: the SDK's version is %q, want %q", strings.TrimSpace(out), version)
		}
		if out := mustRun(t, dir, python, "-I", "-m", "polyop", "version"); firstLine(out) != want {
			t.Errorf("python -m polyop version printed %q first, want %q:\n%s", firstLine(out), want, out)
		}
	})

	t.Run("the pure wheel's polyop says how to get the binary and exits 1", func(t *testing.T) {
		dir, venv := virtualenv(t, filepath.Join(pythonDist, "polyop-"+version+"-py3-none-any.whl"))
		mustRun(t, dir, filepath.Join(venv, "bin", "python"), "-I", "-c", "import polyop")
		for _, command := range [][]string{
			{filepath.Join(venv, "bin", "polyop"), "version"},
			{filepath.Join(venv, "bin", "python"), "-I", "-m", "polyop", "version"},
		} {
			cmd := exec.Command(command[0], command[1:]...)
			cmd.Dir = dir
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Errorf("%s: %v, want exit status 1\n%s%s", strings.Join(command, " "), err, stdout.String(), stderr.String())
				continue
			}
			if stdout.Len() != 0 {
				t.Errorf("%s printed on stdout:\n%s", strings.Join(command, " "), stdout.String())
			}
			for _, want := range []string{
				"the polyop binary is not installed",
				"pip install polyop==" + version,
				"go install github.com/polyop/polyop/cmd/polyop@v" + version,
				"https://github.com/polyop/polyop/releases/tag/v" + version,
			} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("%s does not say %q:\n%s", strings.Join(command, " "), want, stderr.String())
				}
			}
		}
	})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func readZipFile(t *testing.T, files map[string]*zip.File, name string) string {
	t.Helper()
	f := files[name]
	if f == nil {
		t.Fatalf("the wheel has no %s", name)
	}
	rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fileHead is the first n bytes of the file at path.
func fileHead(t *testing.T, path string, n int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, n))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sha256Of is the SHA-256 of what open opens.
func sha256Of(t *testing.T, open func() (io.ReadCloser, error)) [sha256.Size]byte {
	t.Helper()
	rc, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		t.Fatal(err)
	}
	return [sha256.Size]byte(h.Sum(nil))
}
