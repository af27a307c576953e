package benchmark

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/polyop/polyop/internal/testenv"
)

// Transport is how the host reaches a sidecar.
type Transport string

const (
	// Unix is a unix socket, polyop's default.
	Unix Transport = "unix"
	// TCP is TCP on the loopback interface.
	TCP Transport = "tcp"
)

// Variant is one way to run the Widget controller: the in-process baseline,
// or the polyop host with a sidecar in some language over some transport.
type Variant struct {
	// Name identifies the variant in the report and on the command line.
	Name string
	// Title describes the variant in the report.
	Title string
	// Baseline is set on the in-process operator, the variant every other is
	// compared with.
	Baseline bool
	// Transport is how the host reaches the sidecar; empty for the baseline.
	Transport Transport

	// available says why the variant cannot run on this machine, or nil.
	available func() error
	// prepare builds what the variant needs before its first run; nil for
	// nothing.
	prepare func() error
	// sidecar returns the command line of the sidecar serving address, its
	// controller declaring workers max concurrent reconciles (the host's
	// workers: the host takes the sidecar's declaration).
	sidecar func(bins binaries, address string, workers int) (bin string, args []string)
	// hostArgs are added to the host's command line; nil for none.
	hostArgs []string
}

// binaries are the Go programs a run needs, built once.
type binaries struct {
	host, inprocess, goSidecar string
}

// Packages built for the runs, relative to the repository root.
const (
	hostPackage      = "./cmd/host"
	inprocessPackage = "./test/benchmark/inprocess"
	goSidecarPackage = "./test/benchmark/gosidecar"
)

// buildBinaries builds the programs into dir with one go build, which links
// them in parallel.
func buildBinaries(dir string) (binaries, error) {
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), hostPackage, inprocessPackage, goSidecarPackage)
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return binaries{}, fmt.Errorf("go build: %w\n%s", err, out)
	}
	return binaries{
		host:      filepath.Join(dir, path.Base(hostPackage)),
		inprocess: filepath.Join(dir, path.Base(inprocessPackage)),
		goSidecar: filepath.Join(dir, path.Base(goSidecarPackage)),
	}, nil
}

func goSidecar(bins binaries, address string, workers int) (string, []string) {
	return bins.goSidecar, []string{"--address", address, "--max-concurrent-reconciles", fmt.Sprint(workers)}
}

func goSkippingSidecar(bins binaries, address string, workers int) (string, []string) {
	bin, args := goSidecar(bins, address, workers)
	return bin, append(args, "--skip-unchanged-inputs")
}

func goImperativeSidecar(bins binaries, address string, workers int) (string, []string) {
	return bins.goSidecar, []string{"--address", address, "--imperative", "--max-concurrent-reconciles", fmt.Sprint(workers)}
}

// Variants lists every variant polyop knows, the baseline first. Those that
// cannot run here (a language runtime or SDK is missing) are listed too, and
// say why through Unavailable.
func Variants() []Variant {
	return []Variant{
		{Name: "in-process", Title: "in-process controller-runtime (baseline)", Baseline: true, available: always},
		{Name: "go-unix", Title: "host + Go sidecar, unix socket", Transport: Unix, available: always, sidecar: goSidecar},
		{Name: "go-unary-unix", Title: "host + Go sidecar, unix socket, unary calls (--sidecar-streams=false)", Transport: Unix,
			available: always, sidecar: goSidecar, hostArgs: []string{"--sidecar-streams=false"}},
		{Name: "go-tcp", Title: "host + Go sidecar, TCP loopback", Transport: TCP, available: always, sidecar: goSidecar},
		{Name: "go-skip-unix", Title: "host + Go sidecar skipping unchanged inputs, unix socket", Transport: Unix,
			available: always, sidecar: goSkippingSidecar},
		{Name: "go-imperative-unix", Title: "host + imperative Go sidecar, unix socket", Transport: Unix,
			available: always, sidecar: goImperativeSidecar},
		{Name: "python-unix", Title: "host + Python sidecar, unix socket", Transport: Unix,
			available: pythonAvailable, sidecar: pythonSidecar},
		{Name: "typescript-unix", Title: "host + TypeScript sidecar, unix socket", Transport: Unix,
			available: typescriptAvailable, prepare: prepareTypeScript, sidecar: typescriptSidecar},
	}
}

// Unavailable says why the variant cannot run on this machine, or returns
// nil when it can.
func (v Variant) Unavailable() error {
	if v.available == nil {
		return nil
	}
	return v.available()
}

func always() error { return nil }

// The sidecars in other languages live in test/benchmark/sidecars, one
// directory each, built on that language's SDK. They run from the
// repository's own environments, which make sets up: the Python virtualenv
// .venv (with sdk/python installed) and the npm workspace's node_modules
// (with sdk/typescript). A variant whose environment is missing says so and
// is skipped.
var (
	sidecarsDir            = filepath.Join(testenv.RepoRoot(), "test", "benchmark", "sidecars")
	pythonSidecarScript    = filepath.Join(sidecarsDir, "python", "widget_sidecar.py")
	pythonInterpreter      = filepath.Join(testenv.RepoRoot(), ".venv", "bin", "python")
	typescriptSidecarDir   = filepath.Join(sidecarsDir, "typescript")
	typescriptSidecarEntry = filepath.Join(typescriptSidecarDir, "dist", "widget_sidecar.js")
	typescriptCompiler     = filepath.Join(testenv.RepoRoot(), "node_modules", ".bin", "tsc")
)

func pythonAvailable() error {
	if err := fileExists(pythonSidecarScript, "the Python Widget sidecar"); err != nil {
		return err
	}
	if err := fileExists(pythonInterpreter, "the Python virtualenv (make venv sets it up)"); err != nil {
		return err
	}
	if out, err := exec.Command(pythonInterpreter, "-c", "import polyop").CombinedOutput(); err != nil {
		return fmt.Errorf("the Python SDK does not import in .venv (make venv installs it): %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func typescriptAvailable() error {
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("node is not installed: %w", err)
	}
	if err := fileExists(filepath.Join(typescriptSidecarDir, "widget_sidecar.ts"), "the TypeScript Widget sidecar"); err != nil {
		return err
	}
	return fileExists(typescriptCompiler, "the npm workspace's TypeScript compiler (make node_modules installs it)")
}

// prepareTypeScript compiles the TypeScript sidecar, and the SDK with it when
// it is not built yet.
func prepareTypeScript() error {
	rel, err := filepath.Rel(testenv.RepoRoot(), typescriptSidecarDir)
	if err != nil {
		return err
	}
	if err := testenv.BuildTypeScript(rel); err != nil {
		return fmt.Errorf("compiling the TypeScript sidecar: %w", err)
	}
	return nil
}

func pythonSidecar(_ binaries, address string, workers int) (string, []string) {
	return pythonInterpreter, []string{pythonSidecarScript, "--address", address,
		"--max-concurrent-reconciles", fmt.Sprint(workers)}
}

func typescriptSidecar(_ binaries, address string, workers int) (string, []string) {
	return "node", []string{typescriptSidecarEntry, "--address", address,
		"--max-concurrent-reconciles", fmt.Sprint(workers)}
}

func fileExists(path, what string) error {
	if _, err := os.Stat(path); err != nil {
		rel, _ := filepath.Rel(testenv.RepoRoot(), path)
		return fmt.Errorf("%s (%s) does not exist yet", what, rel)
	}
	return nil
}

// selectVariants returns the variants named, in Variants' order, or every
// available one when names is empty.
func selectVariants(names []string) ([]Variant, []Skipped, error) {
	all := Variants()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Variant
	var skips []Skipped
	for _, v := range all {
		if len(names) > 0 && !want[v.Name] {
			continue
		}
		delete(want, v.Name)
		if err := v.Unavailable(); err != nil {
			if len(names) > 0 {
				return nil, nil, fmt.Errorf("variant %s cannot run: %w", v.Name, err)
			}
			skips = append(skips, Skipped{Variant: v, Reason: err.Error()})
			continue
		}
		out = append(out, v)
	}
	if len(want) > 0 {
		var unknown, known []string
		for n := range want {
			unknown = append(unknown, n)
		}
		for _, v := range all {
			known = append(known, v.Name)
		}
		return nil, nil, fmt.Errorf("unknown variants %s (known: %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	if len(out) == 0 || !out[0].Baseline {
		return nil, nil, fmt.Errorf("the in-process baseline must be one of the variants: every figure is compared with it")
	}
	return out, skips, nil
}

// Skipped is a variant that could not run, or failed, and why.
type Skipped struct {
	Variant Variant
	Reason  string
}
