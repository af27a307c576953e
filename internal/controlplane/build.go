package controlplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// CacheDir is where polyop keeps the control plane of Kubernetes version:
// <user cache dir>/polyop/k8s-<version> (~/.cache/polyop/k8s-1.37.2 on Linux,
// ~/Library/Caches/polyop/k8s-1.37.2 on macOS).
func CacheDir(version string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the cache directory for the control plane (set KUBEBUILDER_ASSETS instead): %w", err)
	}
	return filepath.Join(cache, "polyop", "k8s-"+version), nil
}

// Missing lists the Binaries that dir does not hold.
func Missing(dir string) []string {
	var missing []string
	for _, name := range Binaries {
		if info, err := os.Stat(filepath.Join(dir, name)); err != nil || info.IsDir() {
			missing = append(missing, name)
		}
	}
	return missing
}

// Builder builds the control-plane binaries from source.
type Builder struct {
	// Source is a folder holding the tools module (hack/tools/envtest).
	// Defaults to "": the copy embedded in polyop, of Version().
	Source string

	// Binaries are the binaries to build, some of Binaries. Defaults to all
	// of them.
	Binaries []string

	// Go is the go command. Defaults to "go" on PATH.
	Go string

	// Printf prints the build's progress, one line per call. Defaults to
	// printing nothing.
	Printf func(format string, args ...any)

	// Interval is how often the progress is printed. Defaults to 5 seconds.
	Interval time.Duration
}

// Build builds b.Binaries into dir, replacing what is there. It builds them
// in a temporary folder next to dir, and renames them into dir only once all
// of them are built: a build that fails or is interrupted leaves dir as it
// was.
func (b Builder) Build(ctx context.Context, dir string) error {
	if len(b.Binaries) == 0 {
		b.Binaries = Binaries
	}
	var pkgs []string
	for _, name := range b.Binaries {
		pkg, ok := packages[name]
		if !ok {
			return fmt.Errorf("no control-plane binary %q: the binaries are %s", name, strings.Join(Binaries, ", "))
		}
		pkgs = append(pkgs, pkg)
	}
	if b.Go == "" {
		b.Go = "go"
	}
	if b.Printf == nil {
		b.Printf = func(string, ...any) {}
	}
	if b.Interval <= 0 {
		b.Interval = 5 * time.Second
	}
	goCmd, err := exec.LookPath(b.Go)
	if err != nil {
		return fmt.Errorf("building the control plane needs Go (%w): install Go, or set KUBEBUILDER_ASSETS to a folder holding %s", err, strings.Join(Binaries, ", "))
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".build-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()

	src, version := b.Source, ""
	if src == "" {
		src, version = filepath.Join(work, "src"), Version()
		if err := writeEmbeddedSource(src); err != nil {
			return err
		}
	} else if version, err = SourceVersion(src); err != nil {
		return err
	}
	out := filepath.Join(work, "bin") + string(filepath.Separator)
	if err := os.Mkdir(out, 0o755); err != nil {
		return err
	}

	what := fmt.Sprintf("%s v%s", strings.Join(b.Binaries, ", "), version)
	b.Printf("building %s from source into %s (the first build takes several minutes; later ones reuse Go's build cache)", what, dir)
	cmd := exec.CommandContext(ctx, goCmd, append([]string{"build", "-v", "-ldflags", versionLDFlags(version), "-o", out}, pkgs...)...)
	cmd.Dir = src
	// The tools module is built on its own, never in a workspace of the
	// directory polyop runs in.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	p := newProgress(what, b.mainPackages(src, pkgs, out), b.Printf)
	cmd.Stdout, cmd.Stderr = p, p
	cmd.WaitDelay = 10 * time.Second
	stop := p.every(b.Interval)
	err = cmd.Run()
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("building %s: %w", what, ctx.Err())
		}
		return fmt.Errorf("building %s: %w%s", what, err, p.outputNote())
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range b.Binaries {
		if err := os.Rename(filepath.Join(out, name), filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("moving %s into %s: %w", name, dir, err)
		}
	}
	p.done()
	return nil
}

// mainPackages maps the import path of each of b.Binaries' main packages,
// pkgs as go build is given them in the tools module at src, to the path go
// build writes the binary to in the folder out: go build -v names a package
// in a folder of the module (./etcd) by its import path.
func (b Builder) mainPackages(src string, pkgs []string, out string) map[string]string {
	module := ""
	if data, err := os.ReadFile(filepath.Join(src, "go.mod")); err == nil {
		module = modulePath(data)
	}
	mains := make(map[string]string, len(pkgs))
	for i, pkg := range pkgs {
		if rel, ok := strings.CutPrefix(pkg, "./"); ok {
			pkg = module + "/" + rel
		}
		mains[pkg] = filepath.Join(out, b.Binaries[i])
	}
	return mains
}

// versionLDFlags stamp version into the binaries: built outside Kubernetes'
// own build scripts, they would report v0.0.0-master.
func versionLDFlags(version string) string {
	major, rest, _ := strings.Cut(version, ".")
	minor, _, _ := strings.Cut(rest, ".")
	return strings.Join([]string{
		"-X k8s.io/component-base/version.gitVersion=v" + version,
		"-X k8s.io/component-base/version.gitMajor=" + major,
		"-X k8s.io/component-base/version.gitMinor=" + minor,
		"-X k8s.io/client-go/pkg/version.gitVersion=v" + version,
	}, " ")
}
