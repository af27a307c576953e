package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/testenv"
)

func TestTheEmbeddedToolsModuleIsHackToolsEnvtest(t *testing.T) {
	t.Parallel()
	for _, path := range SourceFiles {
		want, err := os.ReadFile(filepath.Join("..", "..", "hack", "tools", "envtest", filepath.FromSlash(path)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := EmbeddedSource(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("the embedded %s differs from hack/tools/envtest/%s: run go generate ./internal/controlplane", path, path)
		}
	}
	if v := Version(); v == "" || strings.HasPrefix(v, "v") || strings.Count(v, ".") != 2 {
		t.Errorf("Version() = %q, want X.Y.Z", v)
	}
}

func TestVersionLDFlagsStampEveryVersionVariable(t *testing.T) {
	t.Parallel()
	got := versionLDFlags("1.37.2")
	for _, want := range []string{
		"-X k8s.io/component-base/version.gitVersion=v1.37.2",
		"-X k8s.io/component-base/version.gitMajor=1",
		"-X k8s.io/component-base/version.gitMinor=37",
		"-X k8s.io/client-go/pkg/version.gitVersion=v1.37.2",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("versionLDFlags() = %q, want it to contain %q", got, want)
		}
	}
}

// recorder collects what a progress prints.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

func TestProgressCountsThePackagesGoBuildNames(t *testing.T) {
	t.Parallel()
	var r recorder
	p := newProgress("kube-apiserver v1.37.2", nil, r.printf)
	start := p.start
	p.now = func() time.Time { return start.Add(95 * time.Second) }
	for _, chunk := range []string{
		"k8s.io/api/core/v1\nk8s.io/apim", "achinery/pkg/runtime\n",
		"go: downloading k8s.io/kubernetes v1.37.2\n",
		"# k8s.io/broken\n", "broken/x.go:3:1: syntax error\n",
		"\n", "k8s.io/kubernetes/cmd/kube-apiserver\n",
	} {
		if _, err := p.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	p.report()
	p.done()
	want := []string{
		"building kube-apiserver v1.37.2: 3 packages compiled, 1m35s elapsed",
		"built kube-apiserver v1.37.2 in 1m35s (3 packages compiled)",
	}
	if got := r.all(); !slices.Equal(got, want) {
		t.Errorf("printed %q, want %q", got, want)
	}
	note := p.outputNote()
	for _, want := range []string{"go: downloading", "# k8s.io/broken", "syntax error"} {
		if !strings.Contains(note, want) {
			t.Errorf("the error note %q does not keep %q", note, want)
		}
	}
	if strings.Contains(note, "k8s.io/api/core/v1") {
		t.Errorf("the error note %q holds package names", note)
	}
}

func TestProgressSaysWhichBinariesItLinks(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	src := filepath.Join("..", "..", "hack", "tools", "envtest")
	var pkgs []string
	for _, name := range Binaries {
		pkgs = append(pkgs, packages[name])
	}
	var r recorder
	p := newProgress("kube-apiserver, etcd, kubectl v1.37.2", Builder{Binaries: Binaries}.mainPackages(src, pkgs, out), r.printf)
	start := p.start
	p.now = func() time.Time { return start.Add(50 * time.Second) }
	step := func(output string, built ...string) {
		t.Helper()
		if _, err := p.Write([]byte(output)); err != nil {
			t.Fatal(err)
		}
		for _, name := range built {
			if err := os.WriteFile(filepath.Join(out, name), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		p.report()
	}
	// Each main package is compiled once all it imports is, and its binary
	// is linked right after; the binary is in out once linked.
	step("k8s.io/api/core/v1\n")
	step("k8s.io/kubernetes/cmd/kube-apiserver\n")
	step("github.com/polyop/polyop/hack/tools/envtest/etcd\nk8s.io/kubectl/pkg/cmd\n")
	step("", "kube-apiserver")
	step("k8s.io/kubernetes/cmd/kubectl\n", "etcd")
	step("", "kubectl")
	want := []string{
		"building kube-apiserver, etcd, kubectl v1.37.2: 1 packages compiled, 50s elapsed",
		"building kube-apiserver, etcd, kubectl v1.37.2: 2 packages compiled, linking kube-apiserver, 50s elapsed",
		"building kube-apiserver, etcd, kubectl v1.37.2: 4 packages compiled, linking kube-apiserver, etcd, 50s elapsed",
		"building kube-apiserver, etcd, kubectl v1.37.2: 4 packages compiled, linking etcd, 50s elapsed",
		"building kube-apiserver, etcd, kubectl v1.37.2: 5 packages compiled, linking kubectl, 50s elapsed",
		"building kube-apiserver, etcd, kubectl v1.37.2: 5 packages compiled, 50s elapsed",
	}
	if got := r.all(); !slices.Equal(got, want) {
		t.Errorf("printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestProgressIsPrintedWhileTheBuildRuns(t *testing.T) {
	t.Parallel()
	var r recorder
	p := newProgress("x", nil, r.printf)
	stop := p.every(time.Millisecond)
	testenv.Eventually(t, time.Minute, "a line every interval", func() (bool, string) {
		_, _ = p.Write([]byte("example.com/pkg\n"))
		got := r.all()
		return len(got) >= 2, fmt.Sprintf("%q", got)
	})
	stop()
	if got := r.all(); len(got) < 2 || !strings.HasPrefix(got[0], "building x: ") {
		t.Errorf("printed %q, want a line every interval", got)
	}
}

// fakeGo writes a go command that prints package names as `go build -v`
// does, then writes a binary for each main package into the -o folder, or,
// with FAIL set in its environment file, half of them and fails.
func fakeGo(t *testing.T, fail bool) string {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift 2 ;;
    *) shift ;;
  esac
done
echo k8s.io/api/core/v1 >&2
echo k8s.io/kubernetes/cmd/kube-apiserver >&2
echo binary > "$out/kube-apiserver"
`
	if fail {
		script += "echo '# ./etcd' >&2\necho 'etcd/main.go:1: no' >&2\nexit 1\n"
	} else {
		script += "echo binary > \"$out/etcd\"\necho binary > \"$out/kubectl\"\n"
	}
	path := filepath.Join(dir, "go")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBuildRenamesTheBinariesIntoPlaceOnlyOnceAllAreBuilt(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		fail        bool
		wantMissing []string
	}{
		"if the build succeeds, then every binary is in the folder": {
			wantMissing: nil,
		},
		"if the build fails half-way, then the folder holds no binary and the error says why": {
			fail:        true,
			wantMissing: Binaries,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cache := t.TempDir()
			dir := filepath.Join(cache, "polyop", "k8s-"+Version())
			var r recorder
			err := Builder{Go: fakeGo(t, tc.fail), Printf: r.printf, Interval: time.Hour}.Build(context.Background(), dir)
			if tc.fail {
				if err == nil || !strings.Contains(err.Error(), "etcd/main.go:1: no") {
					t.Errorf("Build() = %v, want the compile error", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := Missing(dir); !slices.Equal(got, tc.wantMissing) {
				t.Errorf("missing %q, want %q", got, tc.wantMissing)
			}
			// Nothing but the folder itself is left next to it.
			entries, err := os.ReadDir(filepath.Dir(dir))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Name() != filepath.Base(dir) {
					t.Errorf("the build left %s behind", e.Name())
				}
			}
			if lines := r.all(); len(lines) == 0 || !strings.HasPrefix(lines[0], "building kube-apiserver, etcd, kubectl v") {
				t.Errorf("printed %q", lines)
			}
		})
	}
}

func TestEnsureUsesKubebuilderAssetsAndNamesWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	if _, err := Ensure(context.Background(), Installer{}); err == nil || !strings.Contains(err.Error(), "has no kube-apiserver, etcd, kubectl") {
		t.Errorf("Ensure() = %v, want an error naming the missing binaries", err)
	}
	for _, name := range Binaries {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := Ensure(context.Background(), Installer{}); err != nil || got != dir {
		t.Errorf("Ensure() = %q, %v, want %q", got, err, dir)
	}
}

func TestBuildOfSomeBinariesMovesOnlyThose(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "k8s")
	if err := (Builder{Go: fakeGo(t, false), Binaries: []string{"kube-apiserver"}}).Build(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if got, want := Missing(dir), []string{"etcd", "kubectl"}; !slices.Equal(got, want) {
		t.Errorf("missing %q, want %q", got, want)
	}
	if err := (Builder{Go: fakeGo(t, false), Binaries: []string{"kubelet"}}).Build(context.Background(), dir); err == nil || !strings.Contains(err.Error(), `no control-plane binary "kubelet"`) {
		t.Errorf("Build(kubelet) = %v, want an error naming the binaries", err)
	}
}

func TestEnsureBuildsIntoTheCacheDirOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the cache directory is set through XDG_CACHE_HOME on Linux only")
	}
	cache := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("PATH", filepath.Dir(fakeGo(t, false)))
	// The download fails at once: the index is a port nothing listens on.
	t.Setenv(IndexEnv, unreachableIndex(t))
	var r recorder
	dir, err := Ensure(context.Background(), Installer{Printf: r.printf})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "polyop", "k8s-"+Version()); dir != want {
		t.Errorf("Ensure() = %q, want %q", dir, want)
	}
	if missing := Missing(dir); len(missing) > 0 {
		t.Errorf("missing %q after the build", missing)
	}
	built := len(r.all())
	// A go that fails now proves the second call builds nothing.
	t.Setenv("PATH", filepath.Dir(fakeGo(t, true)))
	if again, err := Ensure(context.Background(), Installer{Printf: r.printf}); err != nil || again != dir {
		t.Errorf("the second Ensure() = %q, %v, want %q from the cache", again, err, dir)
	}
	if len(r.all()) != built {
		t.Errorf("the second Ensure() printed %q, want nothing", r.all()[built:])
	}
}
