package scaffold

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

// Writer writes a project's files under its root. It refuses to overwrite a
// file the user may have edited unless asked to, and remembers what it
// wrote, so a command can list it.
type Writer struct {
	// Root is the project's root folder.
	Root string
	// Force overwrites files that exist instead of failing.
	Force bool

	written []string
}

// Written returns the files written so far, relative to the root, in order.
func (w *Writer) Written() []string { return w.written }

// WriteFile writes content into path (slash-separated, relative to the
// root), making its folders. It fails when the file exists, unless
// w.Force is set.
func (w *Writer) WriteFile(path string, content []byte) error {
	full := filepath.Join(w.Root, filepath.FromSlash(path))
	if !w.Force {
		if _, err := os.Stat(full); err == nil {
			return fmt.Errorf("%s exists already: remove it, or pass --force to overwrite it", path)
		}
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if strings.HasPrefix(string(content), "#!") {
		mode = 0o755
	}
	if err := os.WriteFile(full, content, mode); err != nil {
		return err
	}
	w.written = append(w.written, path)
	return nil
}

// Template renders the text/template text with data and writes it into
// path. Templates use [[ and ]] as delimiters, so that the {{ }} of
// Makefiles, GitHub workflows and Helm-like files stay as they are.
func (w *Writer) Template(path, text string, data any) error {
	out, err := Render(path, text, data)
	if err != nil {
		return err
	}
	return w.WriteFile(path, out)
}

// Render renders a template of Template's kind.
func Render(name, text string, data any) ([]byte, error) {
	t, err := template.New(name).Delims("[[", "]]").Funcs(Funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// Funcs are the functions every template can call.
var Funcs = template.FuncMap{
	"lower": strings.ToLower,
	"upper": strings.ToUpper,
	"title": func(s string) string {
		if s == "" {
			return s
		}
		return strings.ToUpper(s[:1]) + s[1:]
	},
	"replace": strings.ReplaceAll,
}

// Insert adds text on the line before every line of path (relative to the
// root) that contains marker, keeping the marker line's indentation for each
// line of text, as kubebuilder's +kubebuilder:scaffold markers work. It
// fails when path has no such line, naming the marker to put back.
func (w *Writer) Insert(path, marker, text string) error {
	full := filepath.Join(w.Root, filepath.FromSlash(path))
	data, err := os.ReadFile(full)
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(data), "\n")
	var out strings.Builder
	found := false
	for _, line := range lines {
		if strings.Contains(line, marker) {
			found = true
			indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
				if l == "" {
					out.WriteString("\n")
					continue
				}
				out.WriteString(indent + l + "\n")
			}
		}
		out.WriteString(line)
	}
	if !found {
		return fmt.Errorf("%s has no line with the marker %q, where polyop adds code: put it back where new code belongs", path, marker)
	}
	if err := os.WriteFile(full, []byte(out.String()), 0o644); err != nil {
		return err
	}
	w.written = append(w.written, path)
	return nil
}

// InsertOnce is Insert unless path has the first line of text already: a
// second kind of the same version imports the same package, and a create
// command run again with --force registers nothing twice.
func (w *Writer) InsertOnce(path, marker, text string) error {
	content, err := os.ReadFile(filepath.Join(w.Root, filepath.FromSlash(path)))
	if err != nil {
		return fmt.Errorf("%w: polyop adds the new code to %s, which polyop init writes", err, path)
	}
	if strings.Contains(string(content), strings.SplitN(text, "\n", 2)[0]) {
		return nil
	}
	return w.Insert(path, marker, text)
}

// plainWord is a word sh reads as it is: the characters of ordinary paths.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// ShellQuote quotes s for sh, as a Makefile recipe runs it, when it holds
// anything but the characters of ordinary paths.
func ShellQuote(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ErrNotEmpty is returned by CheckEmpty for a folder with files in it.
var ErrNotEmpty = errors.New("the folder is not empty")

// CheckEmpty returns ErrNotEmpty when dir holds anything but hidden files
// (such as .git) and a go.mod, as kubebuilder init allows.
func CheckEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.Name() == "go.mod" {
			continue
		}
		names = append(names, e.Name())
	}
	if len(names) > 0 {
		return fmt.Errorf("%w: %s holds %s; polyop init starts a project in an empty folder (or pass --force)", ErrNotEmpty, dir, strings.Join(names, ", "))
	}
	return nil
}
