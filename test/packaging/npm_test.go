package packaging_test

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/testenv/npmregistry"
)

// npmPlatforms are the npm packages of polyop's binaries, by GOOS/GOARCH
// (packaging/npm/build.mjs maps them the same way).
var npmPlatforms = map[string]string{
	"linux/amd64":  "@polyop/cli-linux-x64",
	"linux/arm64":  "@polyop/cli-linux-arm64",
	"darwin/amd64": "@polyop/cli-darwin-x64",
	"darwin/arm64": "@polyop/cli-darwin-arm64",
}

// npmSizeBudget is the size a package (npm tarball or wheel) should stay
// under: a user downloads it on every install of polyop.
const npmSizeBudget = 20 * 1000 * 1000

// npmUser is someone installing packages with npm into dir: npm's cache is
// a fresh one of the test's, so that a tarball of the same version cached
// earlier never stands in for the one make just packed, and npm asks no
// registry for news of itself.
type npmUser struct {
	t   *testing.T
	dir string
	env []string
}

func newNPMUser(t *testing.T) *npmUser {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "POLYOP_BINARY" || strings.HasPrefix(strings.ToLower(name), "npm_config_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "npm_config_cache="+filepath.Join(t.TempDir(), "npm-cache"),
		"npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false")
	return &npmUser{t: t, dir: outsideRepository(t), env: env}
}

// run runs a command in the user's folder; it returns the combined output
// and the error, which says the command and holds the output.
func (u *npmUser) run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = u.dir
	cmd.Env = u.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %w\n%s", name, strings.Join(args, " "), u.dir, err, out)
	}
	return string(out), nil
}

func (u *npmUser) mustRun(name string, args ...string) string {
	u.t.Helper()
	out, err := u.run(name, args...)
	if err != nil {
		u.t.Fatal(err)
	}
	return out
}

// TestTheNPMPackagesInstallPolyop packs the npm packages of this machine's
// platform with make (release-binaries, release-npm), serves the @polyop
// tarballs from a registry on loopback and installs @polyop/cli into an
// empty npm project as a user installs it from npmjs.com: npm picks this
// platform's package among its optional dependencies, and npx polyop runs
// its binary.
func TestTheNPMPackagesInstallPolyop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds polyop and packs the npm packages: not with -short")
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	platformPackage, ok := npmPlatforms[platform]
	if !ok {
		t.Skipf("polyop has no npm package for %s", platform)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("no npm on PATH")
	}
	version, err := projectVersion()
	if err != nil {
		t.Fatal(err)
	}
	dist := buildDist(t).dir
	npmDir := filepath.Join(dist, "npm")
	tarballs := []string{
		"polyop-cli-" + version + ".tgz",
		strings.ReplaceAll(strings.TrimPrefix(platformPackage, "@"), "/", "-") + "-" + version + ".tgz",
		"polyop-sidecar-" + version + ".tgz",
	}
	entries, err := os.ReadDir(npmDir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tgz") {
			got = append(got, e.Name())
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, slices.Sorted(slices.Values(tarballs))) {
		t.Errorf("%s holds the tarballs %v, want %v", npmDir, got, tarballs)
	}
	for _, name := range tarballs {
		info, err := os.Stat(filepath.Join(npmDir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		t.Logf("%s: %d bytes (%.1f MB)", name, info.Size(), float64(info.Size())/1e6)
		if info.Size() > npmSizeBudget {
			t.Errorf("%s is %.1f MB, over the %d MB a package should stay under: see docs/releasing.md, What the binary is made of", name, float64(info.Size())/1e6, npmSizeBudget/1000/1000)
		}
	}
	binary := readTarGz(t, filepath.Join(npmDir, tarballs[1]))["package/bin/polyop"]
	if binary.mode != 0o755 {
		t.Errorf("package/bin/polyop in %s has mode %o, want 755", tarballs[1], binary.mode)
	}

	reg, err := npmregistry.Start(filepath.Join(npmDir, tarballs[0]), filepath.Join(npmDir, tarballs[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	u := newNPMUser(t)
	u.mustRun("npm", "init", "-y")
	// Only the @polyop scope comes from the registry on loopback; it has
	// this platform's package only, and npm skips the others, which it
	// cannot find, as optional dependencies.
	u.mustRun("npm", "install", "--save-dev", "--no-audit", "--no-fund", "--cache", filepath.Join(t.TempDir(), "npm-cache"),
		reg.ScopeFlag("@polyop"), "@polyop/cli")

	t.Run("npx polyop runs the binary of the version installed", func(t *testing.T) {
		// --no: never install a package named polyop from a registry.
		out := u.mustRun("npx", "--no", "polyop", "version")
		m := regexp.MustCompile(`(?m)^polyop:\s+(\S+)$`).FindStringSubmatch(out)
		switch {
		case m == nil:
			t.Errorf("npx polyop version printed no polyop line:\n%s", out)
		case m[1] != version:
			t.Errorf("npx polyop version says polyop %q, the VERSION file %q:\n%s", m[1], version, out)
		}
		var v struct{ Platform string }
		if err := json.Unmarshal([]byte(u.mustRun("npx", "--no", "polyop", "version", "--output", "json")), &v); err != nil {
			t.Fatal(err)
		}
		if v.Platform != platform {
			t.Errorf("the polyop npx ran is built for %q, want %q", v.Platform, platform)
		}
		// polyop's failure is the command's.
		out, err := u.run("npx", "--no", "polyop", "no-such-command")
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, `unknown command "no-such-command"`) {
			t.Errorf("npx polyop no-such-command: %v, want polyop's exit code 1 and its message:\n%s", err, out)
		}
	})

	t.Run("package.json and the lockfile hold @polyop/cli and this platform's package as an optional dependency", func(t *testing.T) {
		var pkg struct{ DevDependencies map[string]string }
		if err := json.Unmarshal([]byte(readText(t, filepath.Join(u.dir, "package.json"))), &pkg); err != nil {
			t.Fatal(err)
		}
		if got := pkg.DevDependencies["@polyop/cli"]; got != "^"+version {
			t.Errorf("package.json's devDependencies say @polyop/cli %q, want ^%s", got, version)
		}
		var lock struct {
			Packages map[string]struct {
				Version, Integrity string
				Optional, Dev      bool
			}
		}
		if err := json.Unmarshal([]byte(readText(t, filepath.Join(u.dir, "package-lock.json"))), &lock); err != nil {
			t.Fatal(err)
		}
		cli, native := lock.Packages["node_modules/@polyop/cli"], lock.Packages["node_modules/"+platformPackage]
		if cli.Version != version || !cli.Dev {
			t.Errorf("package-lock.json has @polyop/cli %+v, want version %s as a devDependency", cli, version)
		}
		tgz, err := os.ReadFile(filepath.Join(npmDir, tarballs[1]))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha512.Sum512(tgz)
		integrity := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
		if native.Version != version || !native.Optional || native.Integrity != integrity {
			t.Errorf("package-lock.json has %s %+v, want version %s, optional, with the integrity of %s (%s)", platformPackage, native, version, tarballs[1], integrity)
		}
		for name := range npmPlatforms {
			other := npmPlatforms[name]
			if other == platformPackage {
				continue
			}
			if _, err := os.Stat(filepath.Join(u.dir, "node_modules", other)); err == nil {
				t.Errorf("%s, another platform's package, is installed", other)
			}
		}
		info, err := os.Stat(filepath.Join(u.dir, "node_modules", platformPackage, "bin", "polyop"))
		if err != nil || info.Mode().Perm() != 0o755 {
			t.Errorf("node_modules/%s/bin/polyop is not installed with mode 755: %v", platformPackage, err)
		}
		if got, want := slices.Sorted(slices.Values(reg.Downloads())), []string{platformPackage + "@" + version, "@polyop/cli@" + version}; !slices.Equal(got, want) {
			t.Errorf("npm downloaded %v from the registry, want %v", got, want)
		}
	})

	t.Run("without optional dependencies polyop says which package is missing", func(t *testing.T) {
		u := newNPMUser(t)
		u.mustRun("npm", "init", "-y")
		u.mustRun("npm", "install", "--save-dev", "--omit=optional", "--no-audit", "--no-fund", reg.ScopeFlag("@polyop"), "@polyop/cli")
		out, err := u.run("npx", "--no", "polyop", "version")
		if err == nil {
			t.Fatalf("npx polyop version ran without %s:\n%s", platformPackage, out)
		}
		for _, want := range []string{"The package " + platformPackage, "--omit=optional", "go install github.com/polyop/polyop/cmd/polyop@v" + version} {
			if !strings.Contains(out, want) {
				t.Errorf("npx polyop version without %s does not say %q:\n%s", platformPackage, want, out)
			}
		}
	})
}

// readText reads a file as text.
func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
