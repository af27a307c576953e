package cli

// The languages polyop init supports register their scaffolders when
// imported.
import (
	_ "github.com/polyop/polyop/internal/scaffold/golang"
	_ "github.com/polyop/polyop/internal/scaffold/python"
	_ "github.com/polyop/polyop/internal/scaffold/typescript"
)
