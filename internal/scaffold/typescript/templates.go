package typescript

import (
	"embed"

	"github.com/polyop/polyop/internal/scaffold"
)

// templateFS holds the templates of a TypeScript project's files: the
// project's see a projectData, a kind's a resourceData.
//
//go:embed templates
var templateFS embed.FS

var templates = scaffold.Templates{FS: templateFS}
