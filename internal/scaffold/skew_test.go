package scaffold

import (
	"strings"
	"testing"
)

func TestVersionSkew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		language Language
		want     []string
	}{
		{Python, []string{"pip install polyop==0.1.0", "polyop==0.1.0 in pyproject.toml", "the SDK dependency to polyop==0.2.0 in pyproject.toml"}},
		{TypeScript, []string{"npm i -D @polyop/cli@0.1.0", "@polyop/sidecar 0.1.0 in package.json", "the SDK dependency to @polyop/sidecar 0.2.0 in package.json"}},
		{Go, []string{"go install github.com/polyop/polyop/cmd/polyop@v0.1.0", "github.com/polyop/polyop/sdk/go v0.1.0 in go.mod", "the SDK dependency to github.com/polyop/polyop/sdk/go v0.2.0 in go.mod"}},
	} {
		p := &Project{Language: tc.language, PolyopVersion: "0.1.0"}
		got := p.VersionSkew("0.2.0")
		for _, want := range append(tc.want,
			"this project was made with polyop 0.1.0 (PROJECT's polyopVersion) and this is polyop 0.2.0",
			"the host image config/default deploys ("+HostImage("0.1.0")+")",
			"set polyopVersion in PROJECT to 0.2.0",
			"the host image's tag in config/default to 0.2.0") {
			if !strings.Contains(got, want) {
				t.Errorf("%s: VersionSkew does not say %q:\n%s", tc.language, want, got)
			}
		}
		if got := p.VersionSkew("v0.1.0"); got != "" {
			t.Errorf("%s: VersionSkew of the same version = %q, want none", tc.language, got)
		}
	}
}
