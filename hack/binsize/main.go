// Command binsize builds a Go command as a release build does and prints what
// its binary is made of: the size of the release binary (stripped, -s -w) and
// of its gzip -9 (the deflate a wheel or an npm package applies), then the
// loaded bytes of a build with symbols and DWARF, attributed to modules and
// packages (code, read-only data and type descriptors, the PC-line table,
// initialised data). docs/releasing.md's "What the binary is made of" quotes
// its report for ./cmd/polyop.
//
// Usage:
//
//	go run ./hack/binsize [-pkg ./cmd/polyop] [-packages 40] [-modules 30]
//	    [-json report.json] [-base before.json] [-why k8s.io/apiserver] [-keep dir]
//
// It builds for -goos/-goarch (linux/amd64 by default: it reads ELF) with
// CGO_ENABLED=0 and -trimpath, once with -ldflags "-s -w" (the release
// binary, whose size and gzip size it prints) and once without (to read
// the symbol table, the PC-line table and DWARF). A package's bytes are
// those of the symbols it names; see analyze for how each section is split.
//
// With -json it also writes the report as JSON; with -base it compares the
// report with one written before (a branch's, a trial build's) module by
// module. With -why it prints, for each package whose path starts with the
// given prefix, the shortest chain of imports that brings it into the command.
package main

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
)

func main() {
	pkg := flag.String("pkg", "./cmd/polyop", "the command to build")
	goos := flag.String("goos", "linux", "GOOS to build for (the analysis reads ELF)")
	goarch := flag.String("goarch", runtime.GOARCH, "GOARCH to build for")
	tags := flag.String("tags", "", "build tags")
	nPackages := flag.Int("packages", 40, "how many of the largest packages to list")
	nModules := flag.Int("modules", 30, "how many of the largest modules to list")
	jsonOut := flag.String("json", "", "also write the report as JSON to this file")
	base := flag.String("base", "", "compare with this report, written by -json before")
	why := flag.String("why", "", "print the import chains that bring in the packages with this path prefix")
	keep := flag.String("keep", "", "keep the binaries in this directory (NAME and NAME.unstripped, NAME the command's)")
	reuse := flag.Bool("reuse", false, "with -keep, measure the binaries a run with -keep left there instead of building")
	flag.Parse()
	err := run(options{
		pkg: *pkg, goos: *goos, goarch: *goarch, tags: *tags,
		packages: *nPackages, modules: *nModules,
		jsonOut: *jsonOut, base: *base, why: *why, keep: *keep, reuse: *reuse,
	}, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "binsize:", err)
		os.Exit(1)
	}
}

type options struct {
	// dir is where go list and go build run, "" for the working directory.
	dir                     string
	pkg, goos, goarch, tags string
	packages, modules       int
	jsonOut, base, why      string
	keep                    string
	reuse                   bool
}

// Report is what binsize measures of a command's binary; -json writes it.
type Report struct {
	// Target is the command's package as given (./cmd/polyop).
	Target    string `json:"target"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	GoVersion string `json:"goVersion"`
	// Deps is how many packages the command links (go list -deps).
	Deps int `json:"deps"`
	// Stripped is the release binary's size (-trimpath -ldflags "-s -w").
	Stripped int64 `json:"stripped"`
	// Gzip is the release binary's size gzipped at level 9.
	Gzip int64 `json:"gzip"`
	// Unstripped is the size of the same build without -s -w.
	Unstripped int64 `json:"unstripped"`
	// Sections are the unstripped binary's sections.
	Sections []section `json:"sections"`
	// Modules and Packages are the loaded bytes attributed to each, largest
	// first; the module "std" is the standard library.
	Modules  []Part `json:"modules"`
	Packages []Part `json:"packages"`
	// Unattributed are the loaded bytes no package's symbol names.
	Unattributed []Part `json:"unattributed"`
}

// A Part is the bytes of a binary one module, package or unattributed kind
// of data takes.
type Part struct {
	Name string `json:"name"`
	// Module is a package's module.
	Module string `json:"module,omitempty"`
	// Packages is how many of a module's packages have bytes in the binary.
	Packages int `json:"packages,omitempty"`
	sizes
	// Total is the sum of the columns.
	Total int64 `json:"total"`
}

// A listedPackage is what go list says of one package the command links.
type listedPackage struct {
	ImportPath string
	Name       string
	Standard   bool
	Module     *struct{ Path string }
	Imports    []string
}

func (p listedPackage) module() string {
	switch {
	case p.Standard:
		return "std"
	case p.Module != nil:
		return p.Module.Path
	}
	return "(no module)"
}

func run(o options, out io.Writer) error {
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS="+o.goos, "GOARCH="+o.goarch)
	deps, err := goList(o.dir, o.pkg, o.tags, env)
	if err != nil {
		return err
	}
	if o.why != "" {
		return printWhy(out, deps, o.why)
	}
	var dir string
	if o.keep == "" {
		if dir, err = os.MkdirTemp("", "binsize"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else {
		if dir, err = filepath.Abs(o.keep); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	name := path.Base(deps[0].ImportPath)
	stripped := filepath.Join(dir, name)
	unstripped := filepath.Join(dir, name+".unstripped")
	if !o.reuse || o.keep == "" {
		if err := goBuild(o.dir, o.pkg, o.tags, stripped, env, "-s -w"); err != nil {
			return err
		}
		if err := goBuild(o.dir, o.pkg, o.tags, unstripped, env, ""); err != nil {
			return err
		}
	}
	r, err := measure(o, deps, stripped, unstripped, env)
	if err != nil {
		return err
	}
	printReport(out, r, o.modules, o.packages)
	if o.base != "" {
		b, err := readReport(o.base)
		if err != nil {
			return err
		}
		fmt.Fprintln(out)
		printComparison(out, b, r, o.modules)
	}
	if o.jsonOut != "" {
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.jsonOut, append(data, '\n'), 0o644)
	}
	return nil
}

// goList lists the packages pkg links, itself first.
func goList(dir, pkg, tags string, env []string) ([]listedPackage, error) {
	cmd := exec.Command("go", "list", "-deps", "-tags="+tags, "-json=ImportPath,Name,Standard,Module,Imports", pkg)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stderr = os.Stderr
	data, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", pkg, err)
	}
	var deps []listedPackage
	for d := json.NewDecoder(bytes.NewReader(data)); ; {
		var p listedPackage
		if err := d.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		deps = append(deps, p)
	}
	if len(deps) == 0 {
		return nil, fmt.Errorf("go list %s: no packages", pkg)
	}
	// -deps lists a package after its dependencies: the command comes last.
	slices.Reverse(deps)
	return deps, nil
}

// goBuild builds pkg into out as a release build does, with ldflags.
func goBuild(dir, pkg, tags, out string, env []string, ldflags string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-tags="+tags, "-ldflags="+ldflags, "-o", out, pkg)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

// measure builds the report of the binaries built from deps[0].
func measure(o options, deps []listedPackage, stripped, unstripped string, env []string) (*Report, error) {
	r := &Report{Target: o.pkg, GOOS: o.goos, GOARCH: o.goarch, Deps: len(deps)}
	cmd := exec.Command("go", "env", "GOVERSION")
	cmd.Dir, cmd.Env = o.dir, env
	v, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	r.GoVersion = strings.TrimSpace(string(v))
	if r.Stripped, err = fileSize(stripped); err != nil {
		return nil, err
	}
	if r.Unstripped, err = fileSize(unstripped); err != nil {
		return nil, err
	}
	if r.Gzip, err = gzipSize(stripped); err != nil {
		return nil, err
	}

	known := map[string]bool{}
	modules := map[string]string{}
	for _, p := range deps {
		path := p.ImportPath
		if p.Name == "main" {
			path = "main" // the compiler names the command's symbols main.*
		}
		known[path] = true
		modules[path] = p.module()
	}
	modules["main"] = deps[0].module()
	a, err := analyze(unstripped, known)
	if err != nil {
		return nil, err
	}
	r.Sections = a.Sections
	byModule := map[string]*Part{}
	for path, s := range a.Packages {
		name := path
		if path == "main" {
			name = deps[0].ImportPath
		}
		mod := modules[path]
		r.Packages = append(r.Packages, Part{Name: name, Module: mod, sizes: *s, Total: s.Total()})
		m := byModule[mod]
		if m == nil {
			m = &Part{Name: mod}
			byModule[mod] = m
		}
		m.add(*s)
		m.Packages++
	}
	for _, m := range byModule {
		m.Total = m.sizes.Total()
		r.Modules = append(r.Modules, *m)
	}
	for what, s := range a.Unattributed {
		r.Unattributed = append(r.Unattributed, Part{Name: what, sizes: *s, Total: s.Total()})
	}
	for _, parts := range [][]Part{r.Modules, r.Packages, r.Unattributed} {
		slices.SortFunc(parts, func(a, b Part) int {
			return cmp.Or(cmp.Compare(b.Total, a.Total), strings.Compare(a.Name, b.Name))
		})
	}
	return r, nil
}

// gzipSize returns the size of the file at path gzipped at level 9.
func gzipSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n countingWriter
	w, err := gzip.NewWriterLevel(&n, gzip.BestCompression)
	if err != nil {
		return 0, err
	}
	if _, err := io.Copy(w, f); err != nil {
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return int64(n), nil
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

func readReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// mb formats n bytes in megabytes (10^6 bytes), as release pages do.
func mb(n int64) string { return fmt.Sprintf("%.2f", float64(n)/1e6) }

func printReport(out io.Writer, r *Report, nModules, nPackages int) {
	fmt.Fprintf(out, "%s (%s/%s, %s, %d packages)\n", r.Target, r.GOOS, r.GOARCH, r.GoVersion, r.Deps)
	fmt.Fprintf(out, "release binary (-s -w): %s MB, gzip -9: %s MB; with symbols and DWARF: %s MB\n",
		mb(r.Stripped), mb(r.Gzip), mb(r.Unstripped))
	var loaded sizes
	for _, p := range r.Modules {
		loaded.add(p.sizes)
	}
	var rest sizes
	for _, p := range r.Unattributed {
		rest.add(p.sizes)
	}
	fmt.Fprintf(out, "attributed to packages: %s MB (text %s, rodata %s, pclntab %s, data %s); not attributed: %s MB\n",
		mb(loaded.Total()), mb(loaded.Text), mb(loaded.Rodata), mb(loaded.Pclntab), mb(loaded.Data), mb(rest.Total()))
	var secs []string
	for _, s := range r.Sections {
		if s.Size >= 100_000 {
			secs = append(secs, fmt.Sprintf("%s %s", s.Name, mb(s.Size)))
		}
	}
	fmt.Fprintf(out, "sections over 0.1 MB (MB): %s\n", strings.Join(secs, ", "))

	fmt.Fprintln(out, "\nBy module (MB):")
	printParts(out, r.Modules, nModules, true, 0)
	fmt.Fprintln(out, "\nBy package (MB):")
	printParts(out, r.Packages, nPackages, false, 0)
	fmt.Fprintln(out, "\nNot attributed, 5 kB or more (MB):")
	printParts(out, r.Unattributed, 0, false, 5000)
}

// printParts prints the first n parts (all for 0) of at least least bytes
// each, and the sum of the others.
func printParts(out io.Writer, parts []Part, n int, modules bool, least int64) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "total\ttext\trodata\tpclntab\tdata\t"
	if modules {
		head += "pkgs\t"
	}
	fmt.Fprintln(w, head+" ")
	var rest Part
	for i, p := range parts {
		if n > 0 && i >= n || p.Total < least {
			rest.add(p.sizes)
			rest.Total += p.Total
			rest.Packages++
			continue
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t", mb(p.Total), mb(p.Text), mb(p.Rodata), mb(p.Pclntab), mb(p.Data))
		if modules {
			line += fmt.Sprintf("%d\t", p.Packages)
		}
		fmt.Fprintln(w, line+" "+p.Name)
	}
	if rest.Packages > 0 {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t", mb(rest.Total), mb(rest.Text), mb(rest.Rodata), mb(rest.Pclntab), mb(rest.Data))
		if modules {
			line += "\t"
		}
		fmt.Fprintln(w, line+fmt.Sprintf(" (%d more)", rest.Packages))
	}
	w.Flush()
}

// printComparison prints how after differs from before: the binaries, then
// the modules whose size changed most.
func printComparison(out io.Writer, before, after *Report, n int) {
	fmt.Fprintf(out, "Compared with %s's report (%d packages before, %d now):\n", before.Target, before.Deps, after.Deps)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "before\tnow\tchange\t ")
	row := func(b, a int64, name string) {
		fmt.Fprintf(w, "%s\t%s\t%+.2f\t %s\n", mb(b), mb(a), float64(a-b)/1e6, name)
	}
	row(before.Stripped, after.Stripped, "release binary (-s -w)")
	row(before.Gzip, after.Gzip, "gzip -9")
	row(before.Unstripped, after.Unstripped, "with symbols and DWARF")
	type change struct {
		name   string
		b, a   int64
		change int64
	}
	var changes []change
	was := map[string]int64{}
	for _, m := range before.Modules {
		was[m.Name] = m.Total
	}
	for _, m := range after.Modules {
		if d := m.Total - was[m.Name]; d != 0 {
			changes = append(changes, change{m.Name, was[m.Name], m.Total, d})
		}
		delete(was, m.Name)
	}
	for name, b := range was {
		changes = append(changes, change{name + " (gone)", b, 0, -b})
	}
	slices.SortFunc(changes, func(x, y change) int {
		return cmp.Or(cmp.Compare(abs(y.change), abs(x.change)), strings.Compare(x.name, y.name))
	})
	fmt.Fprintln(w, "\t\t\t ")
	for i, c := range changes {
		if i >= n {
			break
		}
		row(c.b, c.a, c.name)
	}
	w.Flush()
}

func abs(n int64) int64 { return max(n, -n) }

// printWhy prints, for each package of deps whose path starts with prefix,
// the shortest chain of imports from deps[0] to it, shortest chains first.
func printWhy(out io.Writer, deps []listedPackage, prefix string) error {
	imports := map[string][]string{}
	for _, p := range deps {
		imports[p.ImportPath] = p.Imports
	}
	root := deps[0].ImportPath
	parent := map[string]string{root: ""}
	queue := []string{root}
	var found []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if strings.HasPrefix(p, prefix) {
			found = append(found, p)
		}
		for _, q := range imports[p] {
			if _, seen := parent[q]; !seen {
				parent[q] = p
				queue = append(queue, q)
			}
		}
	}
	if len(found) == 0 {
		return fmt.Errorf("%s links no package %s*", root, prefix)
	}
	const most = 12
	for i, p := range found {
		if i == most {
			fmt.Fprintf(out, "(and %d more)\n", len(found)-most)
			break
		}
		var chain []string
		for q := p; q != ""; q = parent[q] {
			chain = append(chain, q)
		}
		slices.Reverse(chain)
		fmt.Fprintln(out, strings.Join(chain, "\n  -> "))
	}
	return nil
}
