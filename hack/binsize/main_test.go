package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSymbolPackage(t *testing.T) {
	t.Parallel()
	known := map[string]bool{
		"k8s.io/api/core/v1": true, "os": true, "io": true, "internal/cpu": true,
		"gopkg.in/inf.v0": true, "main": true, "runtime": true,
	}
	for name, want := range map[string]string{
		"k8s.io/api/core/v1.(*Pod).Marshal":                     "k8s.io/api/core/v1",
		"k8s.io/api/core/v1.init.func1":                         "k8s.io/api/core/v1",
		"gopkg.in/inf%2ev0.(*Dec).String":                       "gopkg.in/inf.v0",
		"main.main":                                             "main",
		"sync/atomic.(*Pointer[k8s.io/api/core/v1.Pod]).Load":   "sync/atomic",
		"slices.Sort[go.shape.[]string,go.shape.string]":        "slices",
		"type:.eq.[8]internal/cpu.option":                       "internal/cpu",
		"type:.eq.k8s.io/api/core/v1.PodSpec":                   "k8s.io/api/core/v1",
		"go:itab.*os.File,io.Reader":                            "os",
		"go:struct { *k8s.io/api/core/v1.Pod; X int }.DeepCopy": "k8s.io/api/core/v1",
		"go:string.*":         "",
		"runtime.gcbits.*":    "runtime",
		"type:.eq.[41]string": "",
		"aeshashbody":         "",
		"type:.eq.go.shape.d35b55ec7c47c75c8c0dec06b521fb0eae44": "",
	} {
		if got := symbolPackage(name, known); got != want {
			t.Errorf("symbolPackage(%q) = %q, want %q", name, got, want)
		}
	}
	for name, want := range map[string]string{
		"*k8s.io/api/core/v1.Pod":                     "k8s.io/api/core/v1",
		"[]k8s.io/api/core/v1.Pod":                    "k8s.io/api/core/v1",
		"map[string]*k8s.io/api/core/v1.Pod":          "k8s.io/api/core/v1",
		"func(*os.File) error":                        "os",
		"noalg.map.group[string]k8s.io/api/core/v1.X": "k8s.io/api/core/v1",
		"[]string":                 "",
		"func() go.shape.[]string": "",
	} {
		if got := typePackage(name, known); got != want {
			t.Errorf("typePackage(%q) = %q, want %q", name, got, want)
		}
	}
}

// A small module: a command and a package of its own with code, a type with
// methods, a table of data and read-only data.
var tiny = map[string]string{
	"go.mod": "module example.com/tiny\n\ngo 1.26\n",
	"main.go": `package main

import (
	"fmt"
	"os"

	"example.com/tiny/big"
)

func main() {
	r := &big.Record{Name: os.Args[0]}
	fmt.Println(big.Sum(len(os.Args)), r, big.Lookup(len(os.Args)))
}
`,
	"big/big.go": `package big

import "fmt"

// Record has a type descriptor with methods.
type Record struct {
	Name   string
	Values [16]int
}

func (r *Record) String() string { return fmt.Sprint(r.Name, r.Values) }

// Table is initialised data.
var Table = []string{"alpha", "beta", "gamma", "delta", "epsilon"}

//go:noinline
func Sum(n int) int {
	s := 0
	for i := range n * 1000 {
		s += i * i % 7
	}
	return s
}

func Lookup(i int) string { return Table[i%len(Table)] }
`,
}

func TestAReportAttributesEveryLoadedByteOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range tiny {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "report.json")
	var printed bytes.Buffer
	err := run(options{dir: dir, pkg: ".", goos: "linux", goarch: "amd64", packages: 100, modules: 5, jsonOut: out, keep: filepath.Join(dir, "bin")}, &printed)
	if err != nil {
		t.Fatal(err)
	}
	r, err := readReport(out)
	if err != nil {
		t.Fatal(err)
	}

	if r.Gzip <= 0 || r.Gzip >= r.Stripped || r.Stripped >= r.Unstripped {
		t.Errorf("gzip %d, stripped %d, unstripped %d: want 0 < gzip < stripped < unstripped", r.Gzip, r.Stripped, r.Unstripped)
	}
	if fi, err := os.Stat(filepath.Join(dir, "bin", "tiny")); err != nil || fi.Size() != r.Stripped {
		t.Errorf("the kept release binary: %v, want %d bytes", err, r.Stripped)
	}

	// Every loaded byte once: the modules' and the unattributed parts' sum
	// is the loaded sections'.
	var loaded, counted int64
	sections := map[string]int64{}
	for _, s := range r.Sections {
		sections[s.Name] = s.Size
		if s.Name == ".text" || s.Name == ".rodata" || s.Name == ".gopclntab" || s.Name == ".typelink" ||
			s.Name == ".itablink" || s.Name == ".noptrdata" || s.Name == ".data" || strings.HasPrefix(s.Name, ".go.") || strings.HasPrefix(s.Name, ".note") {
			loaded += s.Size
		}
	}
	var text int64
	for _, parts := range [][]Part{r.Modules, r.Unattributed} {
		for _, p := range parts {
			counted += p.Total
			text += p.Text
		}
	}
	if counted != loaded {
		t.Errorf("the report counts %d bytes, the loaded sections have %d", counted, loaded)
	}
	if text != sections[".text"] {
		t.Errorf("the report counts %d bytes of text, .text has %d", text, sections[".text"])
	}

	// The module's own packages, each in each column it has bytes in.
	byName := map[string]Part{}
	for _, p := range r.Packages {
		byName[p.Name] = p
	}
	big, cmd := byName["example.com/tiny/big"], byName["example.com/tiny"]
	if big.Module != "example.com/tiny" || big.Text == 0 || big.Pclntab == 0 || big.Rodata == 0 || big.Data == 0 {
		t.Errorf("example.com/tiny/big is %+v, want text, rodata (Record's descriptor), pclntab and data in module example.com/tiny", big)
	}
	if cmd.Module != "example.com/tiny" || cmd.Text == 0 {
		t.Errorf("the command's package is %+v, want text in module example.com/tiny", cmd)
	}
	if fmtPkg := byName["fmt"]; fmtPkg.Module != "std" || fmtPkg.Text == 0 {
		t.Errorf("fmt is %+v, want text in module std", fmtPkg)
	}
	// Most of the type descriptors are found.
	for _, u := range r.Unattributed {
		if strings.HasPrefix(u.Name, "type data not found") && u.Total > sections[".rodata"]/5 {
			t.Errorf("%d of .rodata's %d bytes are type data not found", u.Total, sections[".rodata"])
		}
	}
	for _, want := range []string{"release binary (-s -w)", "By module (MB):", "example.com/tiny/big"} {
		if !strings.Contains(printed.String(), want) {
			t.Errorf("the printed report has no %q:\n%s", want, printed.String())
		}
	}

	// Compared with itself, nothing changed.
	var compared bytes.Buffer
	printComparison(&compared, r, r, 5)
	if !strings.Contains(compared.String(), "+0.00 release binary (-s -w)") {
		t.Errorf("a report compared with itself:\n%s", compared.String())
	}
}

func TestWhyPrintsTheShortestChain(t *testing.T) {
	t.Parallel()
	deps := []listedPackage{
		{ImportPath: "example.com/cmd", Imports: []string{"example.com/a", "example.com/b"}},
		{ImportPath: "example.com/a", Imports: []string{"example.com/c"}},
		{ImportPath: "example.com/b", Imports: []string{"example.com/big/x"}},
		{ImportPath: "example.com/c", Imports: []string{"example.com/big/x"}},
		{ImportPath: "example.com/big/x"},
	}
	var out bytes.Buffer
	if err := printWhy(&out, deps, "example.com/big"); err != nil {
		t.Fatal(err)
	}
	if want := "example.com/cmd\n  -> example.com/b\n  -> example.com/big/x\n"; out.String() != want {
		t.Errorf("printWhy printed\n%s\nwant\n%s", out.String(), want)
	}
	if err := printWhy(&out, deps, "example.com/none"); err == nil {
		t.Error("printWhy found a package no chain leads to")
	}
}
