package scaffold

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/testenv"
)

// fakeLanguage is a Scaffolder for tests of what every language shares: it
// writes one file and gives recipes that only echo.
type fakeLanguage struct{ tasks Tasks }

func (fakeLanguage) Defaults(p *Project) error {
	p.Sidecar = SidecarCommands{Build: []string{"true"}, Command: []string{"bin/sidecar"}}
	return nil
}

func (fakeLanguage) Init(w *Writer, _ *Project) error {
	return w.WriteFile(".gitignore", []byte("bin/\n"))
}

func (f fakeLanguage) Tasks(*Project) Tasks { return f.tasks }

func (fakeLanguage) CreateAPI(*Writer, *Project, *Resource) error     { return nil }
func (fakeLanguage) CreateWebhook(*Writer, *Project, *Resource) error { return nil }
func (fakeLanguage) GenerateCRDs(context.Context, *Project, string, io.Writer) error {
	return nil
}

// fullTasks fills every field of Tasks but Lint.
var fullTasks = Tasks{
	Setup:  []string{"mkdir -p .deps", "touch .deps/stamp"},
	Stamp:  ".deps/stamp",
	Deps:   []string{"deps.txt"},
	Build:  []string{"echo building"},
	Test:   []string{"echo testing"},
	Clean:  []string{"bin", ".deps"},
	Readme: "\nThe fake language's code is in `src/`.\n",
}

// initFake makes a project of the fake language, registered as Go, in a
// temporary folder and returns its root and the files Init wrote.
func initFake(t *testing.T, tasks Tasks) (string, []string) {
	t.Helper()
	Register(Go, fakeLanguage{tasks: tasks})
	root := filepath.Join(t.TempDir(), "widgets")
	files, err := Init(InitOptions{Dir: root, Language: Go, Domain: "example.com", Version: "1.2.3"})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, "deps.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return root, files
}

func TestInitWritesTheMakefileTheREADMEAndConfigForEveryLanguage(t *testing.T) {
	root, files := initFake(t, fullTasks)
	for _, want := range []string{
		"Makefile", "README.md", ".gitignore", ProjectFile,
		"config/default/kustomization.yaml", "config/default-certmanager/kustomization.yaml",
		"config/polyop/default/kustomization.yaml", "config/polyop/manager/manager.yaml",
		"config/polyop/selfsigned/names/replacements.yaml", "config/polyop/certmanager/inject-ca/replacements.yaml",
		"config/sidecar/kustomization.yaml", CRDKustomization, RoleFile, WebhooksFile, WebhookKustomization,
		"config/samples/kustomization.yaml",
	} {
		if !slices.Contains(files, want) {
			t.Errorf("Init did not write %s; it wrote %v", want, files)
		}
	}
	readme := read(t, root, "README.md")
	for _, want := range []string{"make deploy OVERLAY=default-certmanager", "ghcr.io/polyop/polyop-host:1.2.3", "widgets-sidecar:latest",
		"widgets-system", "The fake language's code is in `src/`.", "`clean` | Removes bin, .deps.",
		// The samples folder holds a kustomization: kubectl apply -f of it fails.
		"kubectl apply -k config/samples"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
	if strings.Contains(readme, "`lint`") {
		t.Error("README.md documents lint, which the language has no recipe for")
	}
}

func TestTheMakefileHelpListsEveryTargetTheLanguageHasARecipeFor(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	root, _ := initFake(t, fullTasks)
	help := run(t, root, "make", "--no-print-directory", "help")
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+\x1b\[36m([a-z-]+)`).FindAllStringSubmatch(help, -1) {
		listed[m[1]] = true
	}
	for _, target := range []string{"help", "setup", "manifests", "generate", "test", "build", "run", "docker-build", "docker-push",
		"clean", "install", "uninstall", "deploy", "undeploy"} {
		if !listed[target] {
			t.Errorf("make help does not list %s:\n%s", target, help)
		}
	}
	if listed["lint"] {
		t.Errorf("make help lists lint, which the language has no recipe for:\n%s", help)
	}

	t.Run("the targets run the language's recipes and polyop", func(t *testing.T) {
		for target, want := range map[string][]string{
			"setup":        {"mkdir -p .deps", "touch .deps/stamp"},
			"build":        {"echo building"},
			"test":         {"echo testing"},
			"manifests":    {"polyop generate"},
			"generate":     {"polyop generate"},
			"run":          {"polyop generate", "polyop run"},
			"install":      {"kubectl kustomize config/crd | kubectl apply -f -"},
			"uninstall":    {"kubectl kustomize config/crd | kubectl delete --ignore-not-found=false -f -"},
			"deploy":       {"/config/default", "value: widgets-sidecar:latest", "kubectl apply -f -"},
			"undeploy":     {"kubectl kustomize config/default | kubectl delete"},
			"clean":        {"rm -rf bin .deps"},
			"docker-build": {"docker build -t widgets-sidecar:latest ."},
		} {
			out := run(t, root, "make", "-n", "--no-print-directory", target)
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("make -n %s does not run %q:\n%s", target, w, out)
				}
			}
		}
		out := run(t, root, "make", "-n", "--no-print-directory", "deploy", "IMG=registry.example.com:5000/w:v2", "OVERLAY=default-certmanager", "POLYOP=/opt/polyop")
		for _, w := range []string{"/opt/polyop generate", "../../config/default-certmanager", "value: registry.example.com:5000/w:v2"} {
			if !strings.Contains(out, w) {
				t.Errorf("make -n deploy IMG=... OVERLAY=... POLYOP=... does not run %q:\n%s", w, out)
			}
		}
	})

	t.Run("setup runs again only when a dependency file changes", func(t *testing.T) {
		run(t, root, "make", "--no-print-directory", "setup")
		if out := run(t, root, "make", "-n", "--no-print-directory", "setup"); strings.Contains(out, "mkdir") {
			t.Errorf("make setup runs the setup again with nothing changed:\n%s", out)
		}
	})
}

func TestAMakefileHasNoTargetForATaskTheLanguageLeavesEmpty(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	root, _ := initFake(t, Tasks{Test: []string{"echo testing"}})
	help := run(t, root, "make", "--no-print-directory", "help")
	for _, target := range []string{"setup", "build", "lint", "clean"} {
		if strings.Contains(help, "\x1b[36m"+target+" ") {
			t.Errorf("make help lists %s, which the language has no recipe for:\n%s", target, help)
		}
	}
	if out := run(t, root, "make", "-n", "--no-print-directory", "test"); !strings.Contains(out, "echo testing") {
		t.Errorf("make -n test = %q", out)
	}
}

func TestEveryConfigEntryRendersWithKustomize(t *testing.T) {
	kubectl := kubectlPath(t)
	root, _ := initFake(t, fullTasks)
	if _, err := CreateAPI(APIOptions{Dir: root, Group: "apps", Version: "v1", Kind: "Widget", Namespaced: true, Resource: true, Controller: true}); err != nil {
		t.Fatalf("CreateAPI: %v", err)
	}
	for _, dir := range []string{"config/default", "config/default-certmanager", "config/crd", "config/rbac", "config/samples"} {
		out := run(t, root, kubectl, "kustomize", dir)
		if dir == "config/samples" && !strings.Contains(out, "kind: Widget\n") {
			// What kubectl apply -k config/samples, as the README says, applies.
			t.Errorf("kubectl kustomize %s has no Widget:\n%s", dir, out)
		}
		if dir != "config/default" && dir != "config/default-certmanager" {
			continue
		}
		for _, want := range []string{
			"namespace: widgets-system",
			"image: ghcr.io/polyop/polyop-host:1.2.3",
			"image: widgets-sidecar:latest",
			"name: widgets-controller-manager",
			"--address=unix:///var/run/polyop/sidecar.sock",
			"kind: ClusterRole\nmetadata:\n  labels:\n    app.kubernetes.io/managed-by: polyop\n    app.kubernetes.io/name: widgets\n  name: widgets-manager-role",
			"name: widgets-webhook\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl kustomize %s has no %q:\n%s", dir, want, out)
			}
		}
	}
}

func TestMakeDeploySetsTheSidecarImageWithoutChangingTheProject(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	kubectl := kubectlPath(t)
	root, _ := initFake(t, fullTasks)
	// A kubectl that prints what it would apply and runs kustomize for real.
	fake := filepath.Join(t.TempDir(), "kubectl")
	script := "#!/bin/sh\nif [ \"$1\" = apply ]; then cat; else exec " + kubectl + " \"$@\"; fi\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	before := read(t, root, "config/default/kustomization.yaml")
	for _, overlay := range []string{"default", "default-certmanager"} {
		out := run(t, root, "make", "--no-print-directory", "deploy", "POLYOP=true", "KUBECTL="+fake,
			"IMG=registry.example.com:5000/widgets:v2", "OVERLAY="+overlay)
		for _, want := range []string{"image: registry.example.com:5000/widgets:v2", "image: ghcr.io/polyop/polyop-host:1.2.3", "namespace: widgets-system"} {
			if !strings.Contains(out, want) {
				t.Errorf("make deploy OVERLAY=%s applies no %q:\n%s", overlay, want, out)
			}
		}
		if strings.Contains(out, "widgets-sidecar:latest") {
			t.Errorf("make deploy OVERLAY=%s still applies the default sidecar image", overlay)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(root, "bin", "deploy.*")); len(left) > 0 {
		t.Errorf("make deploy left its throwaway kustomization behind: %v", left)
	}
	if after := read(t, root, "config/default/kustomization.yaml"); after != before {
		t.Errorf("make deploy changed config/default/kustomization.yaml:\n%s", after)
	}
}

// kubectlPath is the kubectl built with the test control plane.
func kubectlPath(t *testing.T) string {
	t.Helper()
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Skip(err)
	}
	return filepath.Join(assets, "kubectl")
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func read(t *testing.T, root, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
