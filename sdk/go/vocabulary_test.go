package gosdk_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// vocabularyFile is the table of the names the SDKs share, from this module's
// directory in the repository.
var vocabularyFile = filepath.Join("..", "..", "docs", "vocabulary.md")

// sdkPackages are the SDK's packages, by the name the table qualifies a Go
// name with.
var sdkPackages = map[string]string{
	"sidecar":     "github.com/polyop/polyop/sdk/go/sidecar",
	"client":      "github.com/polyop/polyop/sdk/go/client",
	"conditions":  "github.com/polyop/polyop/sdk/go/conditions",
	"sidecartest": "github.com/polyop/polyop/sdk/go/sidecartest",
	"address":     "github.com/polyop/polyop/sdk/go/address",
	"tracing":     "github.com/polyop/polyop/sdk/go/tracing",
}

// TestEveryGoNameOfTheVocabularyExists reads the Go column of
// docs/vocabulary.md and checks that every name in backticks exists in the
// SDK: package.Name (a function, type, variable or constant),
// package.Type.Member (a method or field, promoted ones and those of an
// aliased type included), or a bare Member of the last name before it in the
// same cell (of the type, or of what the function returns: the builder's
// For after NewControllerManagedBy).
//
// A span in backticks that starts with "func(" is the signature of the name
// before it: the test renders the declared signature (see signature) and
// compares the two, so that a parameter added, removed, renamed or moved, or
// a return type changed, fails here until the table says so too.
//
// The names are looked up with go/types in the packages' compiled export
// data, so that an alias such as sidecar.Result (controller-runtime's
// reconcile.Result) has the fields and methods of the type it names.
func TestEveryGoNameOfTheVocabularyExists(t *testing.T) {
	t.Parallel()
	table, err := os.ReadFile(vocabularyFile)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s is not there: the module is not in its repository", vocabularyFile)
	}
	if err != nil {
		t.Fatal(err)
	}
	cells := goColumn(t, table)
	pkgs := loadSDK(t)

	checked, signatures := 0, 0
	for _, c := range cells {
		var last, prev types.Object // the last qualified name, and the last name
		for _, name := range backticked(c.text) {
			if strings.HasPrefix(name, "func(") {
				if prev == nil {
					t.Errorf("%s:%d: `%s`: a signature, but no name before it in the cell", vocabularyFile, c.line, name)
					continue
				}
				if got, err := signature(prev); err != nil {
					t.Errorf("%s:%d: `%s`: %v", vocabularyFile, c.line, name, err)
				} else if got != name {
					t.Errorf("%s:%d: %s is declared\n\t%s\nbut the table says\n\t%s", vocabularyFile, c.line, prev.Name(), got, name)
				}
				signatures++
				continue
			}
			obj, err := lookUp(pkgs, name, last)
			prev = obj
			if err != nil {
				t.Errorf("%s:%d: `%s`: %v", vocabularyFile, c.line, name, err)
				continue
			}
			if strings.Contains(name, ".") {
				last = obj
			}
			checked++
		}
	}
	t.Logf("%d Go names and %d signatures checked", checked, signatures)
	// A table whose layout the test no longer understands checks nothing.
	if checked < 40 {
		t.Errorf("only %d Go names were checked: does the table still have a Go column?", checked)
	}
	if signatures < 15 {
		t.Errorf("only %d Go signatures were checked: does the table still have its signatures?", signatures)
	}
}

// importNames are the names the table writes other packages' types with,
// where Go code usually imports them under a name other than the package's.
var importNames = map[string]string{
	"k8s.io/apimachinery/pkg/apis/meta/v1": "metav1",
}

// signature renders the declared signature of obj, a function, a method, or
// a type or field of a function type, as the table writes it:
// "func(name type, ...) results", with each type of another package
// qualified by its import name (see importNames), variadic parameters as
// "...T", and the results' types without their names.
func signature(obj types.Object) (string, error) {
	sig, ok := obj.Type().Underlying().(*types.Signature)
	if !ok {
		return "", fmt.Errorf("%s is a %s, which has no signature", obj.Name(), types.TypeString(obj.Type(), nil))
	}
	qualifier := func(p *types.Package) string {
		if name, ok := importNames[p.Path()]; ok {
			return name
		}
		return p.Name()
	}
	var b strings.Builder
	b.WriteString("func(")
	params := sig.Params()
	for i := range params.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		p := params.At(i)
		if p.Name() != "" {
			b.WriteString(p.Name() + " ")
		}
		if sig.Variadic() && i == params.Len()-1 {
			b.WriteString("..." + types.TypeString(p.Type().(*types.Slice).Elem(), qualifier))
		} else {
			b.WriteString(types.TypeString(p.Type(), qualifier))
		}
	}
	b.WriteString(")")
	results := sig.Results()
	switch results.Len() {
	case 0:
	case 1:
		b.WriteString(" " + types.TypeString(results.At(0).Type(), qualifier))
	default:
		b.WriteString(" (")
		for i := range results.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(types.TypeString(results.At(i).Type(), qualifier))
		}
		b.WriteString(")")
	}
	return b.String(), nil
}

// cell is the Go cell of one row of the table.
type cell struct {
	line int
	text string
}

// goColumn returns the cells of the column headed "Go" of every table.
func goColumn(t *testing.T, data []byte) []cell {
	t.Helper()
	var cells []cell
	column := -1 // the Go column of the table being read; -1 outside a table
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			column = -1
			continue
		}
		fields := splitRow(line)
		switch {
		case column < 0:
			for i, f := range fields {
				if strings.TrimSpace(f) == "Go" {
					column = i
				}
			}
			if column < 0 {
				t.Fatalf("%s:%d: a table without a Go column", vocabularyFile, n)
			}
		case strings.Trim(line, "|- ") == "":
			// The header's separator.
		case column < len(fields):
			cells = append(cells, cell{line: n, text: fields[column]})
		default:
			t.Errorf("%s:%d: the row has no Go cell", vocabularyFile, n)
		}
	}
	return cells
}

// splitRow returns the cells of a table's row. A "|" inside a cell, in a
// type union for example, is written "\\|", as GitHub's tables need.
func splitRow(line string) []string {
	const escaped = "\x00"
	fields := strings.Split(strings.Trim(strings.ReplaceAll(line, `\|`, escaped), "|"), "|")
	for i, f := range fields {
		fields[i] = strings.ReplaceAll(f, escaped, "|")
	}
	return fields
}

var backtickedName = regexp.MustCompile("`([^`]+)`")

func backticked(s string) []string {
	var out []string
	for _, m := range backtickedName.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// loadSDK type-checks nothing itself: it reads the SDK's packages from the
// export data the go command compiles for them.
func loadSDK(t *testing.T) map[string]*types.Package {
	t.Helper()
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}
	for _, path := range sdkPackages {
		args = append(args, path)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		path, file, _ := strings.Cut(strings.TrimSpace(line), "=")
		exports[path] = file
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	pkgs := map[string]*types.Package{}
	for name, path := range sdkPackages {
		p, err := imp.Import(path)
		if err != nil {
			t.Fatalf("importing %s: %v", path, err)
		}
		pkgs[name] = p
	}
	return pkgs
}

// lookUp finds name, as the table writes it, in the SDK's packages; last is
// the qualified name before it in the same cell, for a bare member.
func lookUp(pkgs map[string]*types.Package, name string, last types.Object) (types.Object, error) {
	parts := strings.Split(name, ".")
	if len(parts) == 1 {
		if last == nil {
			return nil, errors.New("a bare name, but no package.Name before it in the cell to be a member of")
		}
		return member(last, name)
	}
	pkg, ok := pkgs[parts[0]]
	if !ok {
		return nil, fmt.Errorf("%s is not a package of the SDK (%s): write names of other modules as plain text", parts[0], strings.Join(sortedKeys(pkgs), ", "))
	}
	obj := pkg.Scope().Lookup(parts[1])
	if obj == nil || !obj.Exported() {
		return nil, fmt.Errorf("package %s has no exported %s", parts[0], parts[1])
	}
	for _, m := range parts[2:] {
		var err error
		if obj, err = member(obj, m); err != nil {
			return nil, err
		}
	}
	return obj, nil
}

// member finds the method or field name of the type obj is, or of what the
// function obj returns.
func member(obj types.Object, name string) (types.Object, error) {
	typ := obj.Type()
	if fn, ok := obj.(*types.Func); ok {
		results := fn.Type().(*types.Signature).Results()
		if results.Len() == 0 {
			return nil, fmt.Errorf("%s returns nothing to have a %s", obj.Name(), name)
		}
		typ = results.At(0).Type()
	} else if _, ok := obj.(*types.TypeName); !ok {
		return nil, fmt.Errorf("%s is neither a type nor a function", obj.Name())
	}
	m, _, _ := types.LookupFieldOrMethod(typ, true, obj.Pkg(), name)
	if m == nil || !m.Exported() {
		return nil, fmt.Errorf("%s has no exported method or field %s", types.TypeString(typ, nil), name)
	}
	return m, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
