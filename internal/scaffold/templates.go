package scaffold

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
)

// templateFS holds the templates every project shares: the Makefile, the
// README and the kustomizations of config/.
//
//go:embed templates
var templateFS embed.FS

var templates = Templates{FS: templateFS}

// Templates are one language's project templates: the files of its
// templates/ folder, embedded in the binary with embed.FS. Each is a
// text/template of Render's kind, named by its path under templates/.
type Templates struct {
	// FS holds the templates under templates/: the language package's
	// //go:embed templates.
	FS fs.FS
	// Format, when set, formats what a template renders before Writer
	// writes it, by the path it is written to (a Go project's .go files as
	// gofmt formats them). Defaults to nil: written as rendered.
	Format func(path string, src []byte) ([]byte, error)
}

// Render renders the template name (a file of templates/) with data.
func (t Templates) Render(name string, data any) ([]byte, error) {
	text, err := fs.ReadFile(t.FS, path.Join("templates", name))
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return Render(name, string(text), data)
}

// MustRender is Render for a template rendered where no error can be
// returned (a language's README section in its Tasks). It panics when the
// template fails: the templates are embedded, and each language's tests
// render every one.
func (t Templates) MustRender(name string, data any) string {
	out, err := t.Render(name, data)
	if err != nil {
		panic(err)
	}
	return string(out)
}

// RenderFile renders the template name of t with data, formats it with
// t.Format and writes it into path.
func (w *Writer) RenderFile(path string, t Templates, name string, data any) error {
	out, err := t.Render(name, data)
	if err != nil {
		return err
	}
	if t.Format != nil {
		if out, err = t.Format(path, out); err != nil {
			return err
		}
	}
	return w.WriteFile(path, out)
}
