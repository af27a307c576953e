package scaffold

import "strings"

// writeMakefile writes the project's Makefile and README around the
// language's Tasks: the targets and their documentation are the same in
// every language, the recipes the language's. A task the language leaves
// empty has no target and no line in the README. The Makefile's targets are
// documented with "## " after their prerequisites and grouped under "##@ "
// lines, as kubebuilder's Makefile is: make help lists them.
func writeMakefile(w *Writer, p *Project, t Tasks) error {
	data := struct {
		*Project
		Tasks        Tasks
		LanguageName string
		HostImage    string
		SidecarImage string
		Namespace    string
		// Setup is the setup target, a prerequisite of the others, or ""
		// when the language has no setup.
		Setup string
		// Deps and Clean are Tasks.Deps and Tasks.Clean as prose lists.
		Deps, Clean string
		// Readme is Tasks.Readme without surrounding blank lines.
		Readme string
	}{p, t, languageName(p.Language), HostImage(p.PolyopVersion), SidecarImage(p), Namespace(p), "",
		strings.Join(t.Deps, ", "), strings.Join(t.Clean, ", "), strings.TrimSpace(t.Readme)}
	if len(t.Setup) > 0 {
		data.Setup = "setup"
	}
	if err := w.RenderFile("Makefile", templates, "Makefile.tmpl", data); err != nil {
		return err
	}
	return w.RenderFile("README.md", templates, "README.md.tmpl", data)
}

// languageName is l as prose writes it.
func languageName(l Language) string {
	switch l {
	case Go:
		return "Go"
	case Python:
		return "Python"
	case TypeScript:
		return "TypeScript"
	}
	return strings.ToUpper(string(l[:1])) + string(l[1:])
}
