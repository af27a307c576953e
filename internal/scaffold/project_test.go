package scaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProjectRoundTrip(t *testing.T) {
	root := t.TempDir()
	p := &Project{
		Version: ProjectVersion, Name: "widgets", Language: Python, Domain: "example.com",
		Package: "widgets", PolyopVersion: "0.1.0",
		Sidecar: SidecarCommands{Command: []string{".venv/bin/python", "-m", "widgets"}},
		Resources: []Resource{{Group: "ship", Domain: "example.com", Version: "v1", Kind: "Frigate",
			Plural: "frigates", Namespaced: true, API: true, Controller: true, Webhooks: &Webhooks{Validation: true}}},
	}
	if err := p.Save(root); err != nil {
		t.Fatal(err)
	}
	// Found from a folder below the root, as polyop create finds it.
	sub := filepath.Join(root, "src", "widgets")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	got, gotRoot, err := LoadProject(sub)
	if err != nil {
		t.Fatal(err)
	}
	if gotRoot != root {
		t.Errorf("root = %s, want %s", gotRoot, root)
	}
	r := got.FindResource("ship", "v1", "Frigate")
	if r == nil || !r.Webhooks.Validation || r.Webhooks.Defaulting {
		t.Fatalf("resource after the round trip = %+v", r)
	}
	if got.FindResource("ship.example.com", "v1", "Frigate") != r {
		t.Error("FindResource does not take the full API group")
	}
	if r.APIVersion() != "ship.example.com/v1" || r.CRDName() != "frigates.ship.example.com" {
		t.Errorf("APIVersion %s, CRDName %s", r.APIVersion(), r.CRDName())
	}
	if r.SampleFile() != "config/samples/ship_v1_frigate.yaml" {
		t.Errorf("SampleFile = %s", r.SampleFile())
	}
}

func TestLoadProjectErrors(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"unknown field", "version: \"1\"\nlanguage: go\nsidecar: {command: [x]}\nfrobnicate: 1\n", "frobnicate"},
		{"version", "version: \"9\"\nlanguage: go\nsidecar: {command: [x]}\n", `version "9"`},
		{"language", "version: \"1\"\nlanguage: cobol\nsidecar: {command: [x]}\n", `language "cobol"`},
		{"no command", "version: \"1\"\nlanguage: go\n", "sidecar.command is empty"},
		{"kubebuilder's", "cliVersion: 4.10.1\ndomain: tutorial.kubebuilder.io\nlayout:\n- go.kubebuilder.io/v4\nprojectName: project\nversion: \"3\"\n",
			"this is kubebuilder's PROJECT file (go.kubebuilder.io/v4), not polyop's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, ProjectFile), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := LoadProject(root)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), ProjectFile) {
				t.Errorf("error = %v, want one naming the file and %q", err, tc.want)
			}
		})
	}
	if _, _, err := LoadProject(t.TempDir()); err == nil || !strings.Contains(err.Error(), "run polyop init first") {
		t.Errorf("no project: error = %v", err)
	}
}

func TestNewResource(t *testing.T) {
	p := &Project{Domain: "example.com"}
	r, err := NewResource(p, "ship", "v1beta1", "Policy", "", true)
	if err != nil {
		t.Fatal(err)
	}
	if r.Plural != "policies" || r.APIGroup() != "ship.example.com" {
		t.Errorf("resource = %+v", r)
	}
	for _, tc := range []struct{ group, version, kind, plural, want string }{
		{"Ship", "v1", "Frigate", "", `group "Ship"`},
		{"ship", "1", "Frigate", "", `version "1"`},
		{"ship", "v1alpha", "Frigate", "", `version "v1alpha"`},
		{"ship", "v1", "frigate", "", `kind "frigate"`},
		{"ship", "v1", "Frigate", "Frigates", `plural "Frigates"`},
	} {
		if _, err := NewResource(p, tc.group, tc.version, tc.kind, tc.plural, true); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewResource(%q, %q, %q, %q) error = %v, want %q", tc.group, tc.version, tc.kind, tc.plural, err, tc.want)
		}
	}
}

func TestValidateNameAndDomain(t *testing.T) {
	for _, ok := range []string{"widgets", "my-operator", "a1"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Widgets", "-x", "my_operator", strings.Repeat("a", 41)} {
		if err := ValidateName(bad); err == nil {
			t.Errorf("ValidateName(%q) passed", bad)
		}
	}
	if err := ValidateDomain("example.com"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "Example.com", "example..com", "https://example.com"} {
		if err := ValidateDomain(bad); err == nil {
			t.Errorf("ValidateDomain(%q) passed", bad)
		}
	}
}

func TestParseLanguage(t *testing.T) {
	for in, want := range map[string]Language{"go": Go, "Python": Python, "ts": TypeScript, "typescript": TypeScript} {
		if got, err := ParseLanguage(in); err != nil || got != want {
			t.Errorf("ParseLanguage(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseLanguage("rust"); err == nil || !strings.Contains(err.Error(), "go, python or typescript") {
		t.Errorf("ParseLanguage(rust) error = %v", err)
	}
}
