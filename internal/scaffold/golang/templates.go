package golang

import (
	"embed"
	"fmt"
	"go/format"
	"strings"

	"github.com/polyop/polyop/internal/scaffold"
)

// templateFS holds the templates of a Go project's files. They see a data.
//
//go:embed templates
var templateFS embed.FS

// templates renders them, formatting the .go files as gofmt does.
var templates = scaffold.Templates{FS: templateFS, Format: formatGo}

// formatGo formats a rendered Go file as gofmt does; other files it leaves
// as they are.
func formatGo(file string, src []byte) ([]byte, error) {
	if !strings.HasSuffix(file, ".go") {
		return src, nil
	}
	out, err := format.Source(src)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", file, err)
	}
	return out, nil
}

// A handler added to a version's webhook file brings its imports, a step
// of the webhook builder (templates/<handler>_builder.go.tmpl) and its code
// (templates/<handler>.go.tmpl); its test brings imports and a test
// (templates/<handler>_test.go.tmpl).
var (
	defaulterImports = []string{`"context"`}
	validatorImports = []string{
		`"context"`,
		`"unicode/utf8"`,
		`apierrors "k8s.io/apimachinery/pkg/api/errors"`,
		`"k8s.io/apimachinery/pkg/runtime/schema"`,
		`"k8s.io/apimachinery/pkg/util/validation/field"`,
	}
	validatorTestImports = []string{`"strings"`, `"k8s.io/apimachinery/pkg/util/validation/field"`}
)
