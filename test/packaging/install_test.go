package packaging_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/controlplane"
	polyoprun "github.com/polyop/polyop/internal/run"
	"github.com/polyop/polyop/internal/testenv"
	"github.com/polyop/polyop/internal/testenv/envtestmirror"
	"github.com/polyop/polyop/internal/testenv/npmregistry"
)

// installTimeout bounds each step of a user's way from an empty folder to a
// Ready sample: installing packages and starting a control plane take
// minutes on a loaded machine.
const installTimeout = 15 * time.Minute

// pathWithoutGo is this process's PATH without the folders that hold a go
// command: a machine where Go was never installed.
func pathWithoutGo(t *testing.T) string {
	t.Helper()
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if info, err := os.Stat(filepath.Join(dir, "go")); err == nil && !info.IsDir() {
			continue
		}
		keep = append(keep, dir)
	}
	return strings.Join(keep, string(os.PathListSeparator))
}

// user is someone on this machine following a quick start in an empty
// folder: its environment holds no KUBEBUILDER_ASSETS and no kubeconfig,
// and gets polyop's control plane from the mirror into a cache of its own.
type user struct {
	t   *testing.T
	ctx context.Context
	dir string   // the project's folder
	env []string // the environment every command runs with
	// took is how long the steps have taken so far.
	took time.Duration
}

// newUser returns a user whose PATH is path, with extra variables.
func newUser(t *testing.T, ctx context.Context, cacheHome, indexURL, path string, extra ...string) *user {
	t.Helper()
	dir := filepath.Join(outsideRepository(t), "fleet")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "PATH", "KUBEBUILDER_ASSETS", "KUBECONFIG", "XDG_CACHE_HOME", "POLYOP_ENVTEST_INDEX", "GOWORK",
			"VIRTUAL_ENV", "PIP_FIND_LINKS", "PIP_NO_INDEX", "NPM_CONFIG_USERCONFIG":
			continue
		}
		env = append(env, kv)
	}
	// The pip cache stays the machine's (os.UserCacheDir follows
	// XDG_CACHE_HOME, and so would pip's).
	pipCache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "PATH="+path, "XDG_CACHE_HOME="+cacheHome, "POLYOP_ENVTEST_INDEX="+indexURL,
		"PIP_CACHE_DIR="+filepath.Join(pipCache, "pip"), "PIP_DISABLE_PIP_VERSION_CHECK=1")
	return &user{t: t, ctx: ctx, dir: dir, env: append(env, extra...)}
}

// run runs a command in the project's folder and returns its output.
func (u *user) run(name string, args ...string) string {
	u.t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(u.ctx, installTimeout)
	defer cancel()
	// exec.Command would look name up in this process's PATH: the user's
	// is another.
	path := name
	if !strings.Contains(name, "/") {
		if path = lookPath(u.env, name); path == "" {
			u.t.Fatalf("%s is not on the PATH %s", name, getenv(u.env, "PATH"))
		}
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = u.dir
	cmd.Env = u.env
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	u.took += took
	if err != nil {
		u.t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, testenv.Tail(string(out), 80))
	}
	u.t.Logf("%s %s: %s", filepath.Base(name), strings.Join(args, " "), took.Round(time.Second))
	return string(out)
}

// lookPath finds name on the PATH of env.
func lookPath(env []string, name string) string {
	for _, dir := range filepath.SplitList(getenv(env, "PATH")) {
		p := filepath.Join(dir, name)
		if info, err := os.Stat(p); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

func getenv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// makeProject runs the quick start's commands after polyop is installed:
// polyopInit's init, then (after the setup commands) polyop's create of a
// kind with a controller and of its webhooks, then make manifests test.
// polyopInit and polyop are how the user runs polyop: one word, or npx.
func (u *user) makeProject(polyopInit, polyop []string, setup [][]string, initArgs ...string) {
	u.t.Helper()
	u.run(polyopInit[0], append(cloneArgs(polyopInit[1:]), append([]string{"init", "--domain", "example.com"}, initArgs...)...)...)
	for _, cmd := range setup {
		u.run(cmd[0], cmd[1:]...)
	}
	cmd := func(args ...string) { u.run(polyop[0], append(cloneArgs(polyop[1:]), args...)...) }
	cmd("create", "api", "--group", "ship", "--version", "v1", "--kind", "Frigate")
	cmd("create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Frigate", "--defaulting", "--programmatic-validation")
	u.run("make", "manifests", "test")
}

// runUntilReady runs polyop run against a local control plane until the
// sample is Ready, and checks what it printed.
func (u *user) runUntilReady(polyop []string) {
	u.t.Helper()
	out := u.run(polyop[0], append(cloneArgs(polyop[1:]), "run", "--local", "--apply-samples", "--exit-when-ready")...)
	if !strings.Contains(out, polyoprun.ReadyLine) {
		u.t.Errorf("polyop run printed no %q:\n%s", polyoprun.ReadyLine, testenv.Tail(out, 40))
	}
}

// cloneArgs copies s, for appending to.
func cloneArgs(s []string) []string { return append([]string(nil), s...) }

// TestInstallWithoutGo follows each language's quick start as a user would
// on a machine that never had Go (Python, TypeScript) or from the module
// proxy (Go): polyop installed from the packages `make release` built,
// served the way their registries serve them (a pip find-links folder, an
// npm registry on loopback, a GOPROXY=file:// folder), then a project made,
// tested and run against a local control plane that polyop downloads from
// an envtest release index on loopback.
func TestInstallWithoutGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release, installs it three ways and starts control planes: not with -short")
	}
	rel := buildDist(t)
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	mirror, err := envtestmirror.Start(assets, controlplane.Version())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mirror.Close() })
	// One cache for every user: the control plane is downloaded once, the
	// first time, as on a user's machine.
	cacheHome := t.TempDir()
	noGo := pathWithoutGo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*installTimeout)
	defer cancel()

	t.Run("python", func(t *testing.T) {
		tools := filepath.Join(outsideRepository(t), "venv")
		u := newUser(t, ctx, cacheHome, mirror.IndexURL(), filepath.Join(tools, "bin")+string(os.PathListSeparator)+noGo,
			// The project's own virtualenv (make setup) finds polyop in
			// the release and the rest on the index.
			"PIP_FIND_LINKS="+filepath.Join(rel.dir, "python")+" "+rel.wheelhouse)
		if p := lookPath(u.env, "go"); p != "" {
			t.Fatalf("go is still on the PATH: %s", p)
		}
		u.run("python3", "-m", "venv", tools)
		u.run("pip", "install", "--no-index", "--find-links", filepath.Join(rel.dir, "python"), "--find-links", rel.wheelhouse, "polyop=="+rel.version)
		checkVersion(t, u.run("polyop", "version", "--output", "json"), rel.version)
		u.makeProject([]string{"polyop"}, []string{"polyop"}, nil, "--language", "python")
		u.runUntilReady([]string{"polyop"})
		t.Logf("python: %s from an empty folder to a Ready sample, without Go", u.took.Round(time.Second))
	})

	t.Run("typescript", func(t *testing.T) {
		reg, err := npmregistry.StartDir(filepath.Join(rel.dir, "npm"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(reg.Close)
		// The @polyop scope comes from the registry on loopback, as
		// the user's ~/.npmrc would send it to a mirror; everything else
		// from npm's registry, through a cache of the test's own, so that
		// a tarball of the same version cached earlier never stands in for
		// the one make just packed.
		home := outsideRepository(t)
		npmrc := filepath.Join(home, ".npmrc")
		if err := os.WriteFile(npmrc, []byte(reg.ScopeConfig("@polyop")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		u := newUser(t, ctx, cacheHome, mirror.IndexURL(), noGo,
			"NPM_CONFIG_USERCONFIG="+npmrc, "npm_config_cache="+filepath.Join(home, "npm-cache"),
			"npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false")
		if p := lookPath(u.env, "go"); p != "" {
			t.Fatalf("go is still on the PATH: %s", p)
		}
		npx := []string{"npx", "--yes", "@polyop/cli@" + rel.version}
		checkVersion(t, u.run(npx[0], append(cloneArgs(npx[1:]), "version", "--output", "json")...), rel.version)
		// npm install brings the project's own polyop, its devDependency,
		// which npx polyop runs from then on.
		u.makeProject(npx, []string{"npx", "--no", "polyop"}, [][]string{{"npm", "install"}}, "--language", "typescript")
		u.runUntilReady([]string{"npx", "--no", "polyop"})
		t.Logf("typescript: %s from an empty folder to a Ready sample, without Go", u.took.Round(time.Second))
	})

	t.Run("go", func(t *testing.T) {
		gopath := outsideRepository(t)
		gobin := filepath.Join(gopath, "bin")
		realModCache := goEnv(t, "GOMODCACHE")
		u := newUser(t, ctx, cacheHome, mirror.IndexURL(), gobin+string(os.PathListSeparator)+os.Getenv("PATH"),
			"GOWORK=off", "GOBIN="+gobin, "GOMODCACHE="+filepath.Join(gopath, "pkg", "mod"),
			// The build cache stays the machine's; with -trimpath (as the
			// release builds) and cgo off, what make release compiled is
			// reused rather than compiled again.
			"GOCACHE="+goEnv(t, "GOCACHE"), "GOFLAGS=-trimpath -modcacherw", "CGO_ENABLED=0",
			// polyop's modules come from the release's proxy folder, every
			// other from the machine's module cache, else the module proxy.
			"GOPROXY=file://"+filepath.Join(rel.dir, "goproxy")+",file://"+filepath.Join(realModCache, "cache", "download")+","+goEnv(t, "GOPROXY"),
			"GONOSUMDB=github.com/polyop/polyop")
		u.run("go", "install", "github.com/polyop/polyop/cmd/polyop@v"+rel.version)
		checkVersion(t, u.run("polyop", "version", "--output", "json"), rel.version)
		u.makeProject([]string{"polyop"}, []string{"polyop"}, nil, "--language", "go", "--repo", "example.com/fleet")
		gomod, err := os.ReadFile(filepath.Join(u.dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "github.com/polyop/polyop/sdk/go v" + rel.version; !strings.Contains(string(gomod), want) || strings.Contains(string(gomod), "replace") {
			t.Errorf("the project's go.mod does not require %s without a replace:\n%s", want, gomod)
		}
		t.Logf("go: %s from go install to a tested project", u.took.Round(time.Second))
	})
}

// goEnv is go env name.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// checkVersion checks polyop version --output json's answer: every version
// is the release's.
func checkVersion(t *testing.T, out, version string) {
	t.Helper()
	var v struct {
		Version, Host string
		SDKs          struct{ Go, Python, TypeScript string }
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("polyop version --output json printed %q: %v", out, err)
	}
	for what, got := range map[string]string{"polyop": v.Version, "its host": v.Host, "the Go SDK": v.SDKs.Go, "the Python SDK": v.SDKs.Python, "the TypeScript SDK": v.SDKs.TypeScript} {
		if got != version {
			t.Errorf("polyop version says %s is %q, the VERSION file %q", what, got, version)
		}
	}
}
