package scaffold

import (
	"fmt"
	"strings"
)

// VersionSkew says what differs when the project, made by polyop
// p.PolyopVersion, is used by polyop running (a version such as 0.2.0), and
// what to do about it; "" when the two agree. A project pins the polyop that
// made it in three places: PROJECT's polyopVersion, its SDK dependency and
// the host image tag of config/default. Run by another polyop, its sidecar
// talks to that polyop's host under polyop run but to the pinned host once
// deployed, and polyop create writes that polyop's templates beside the
// older ones: so polyop says so at once rather than letting it fail
// somewhere later.
func (p *Project) VersionSkew(running string) string {
	made := strings.TrimPrefix(p.PolyopVersion, "v")
	running = strings.TrimPrefix(running, "v")
	if made == running {
		return ""
	}
	install, dependency := versionPins(p.Language, made)
	_, newDependency := versionPins(p.Language, running)
	return fmt.Sprintf("this project was made with polyop %s (PROJECT's polyopVersion) and this is polyop %s: "+
		"its SDK dependency (%s) and the host image config/default deploys (%s) are %s's. "+
		"Either use polyop %s with it (%s), or move the project to %s: set polyopVersion in %s to %s, "+
		"the SDK dependency to %s, and the host image's tag in config/default to %s",
		made, running, dependency, HostImage(made), made,
		made, install, running, ProjectFile, running, newDependency, running)
}

// versionPins are, for a project of language at polyop version v, the
// command that installs that polyop and the project's SDK dependency.
func versionPins(language Language, v string) (install, dependency string) {
	switch language {
	case Python:
		return "pip install polyop==" + v, "polyop==" + v + " in pyproject.toml"
	case TypeScript:
		return "npm i -D @polyop/cli@" + v, "@polyop/sidecar " + v + " in package.json"
	default:
		return "go install github.com/polyop/polyop/cmd/polyop@v" + v, "github.com/polyop/polyop/sdk/go v" + v + " in go.mod"
	}
}
