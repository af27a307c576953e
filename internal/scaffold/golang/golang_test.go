package golang_test

import (
	"bufio"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/scaffold/golang"
)

// repoRoot is the root of this checkout: the --sdk-source of the projects
// the tests make.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

func TestRequiresAreTheSDKs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "sdk", "go", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	goVersion := ""
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		switch {
		case len(f) == 2 && f[0] == "go":
			goVersion = f[1]
		case len(f) >= 2 && strings.HasPrefix(f[1], "v"):
			versions[f[0]] = f[1]
		}
	}
	if goVersion != golang.GoVersion {
		t.Errorf("GoVersion = %s, sdk/go/go.mod says go %s", golang.GoVersion, goVersion)
	}
	for _, r := range golang.Requires {
		if versions[r.Path] != r.Version {
			t.Errorf("Requires has %s %s, sdk/go/go.mod %q: a project must build with the SDK's versions", r.Path, r.Version, versions[r.Path])
		}
	}
}

func TestControllerGenVersionIsTheMakefiles(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CONTROLLER_GEN_VERSION \?= (\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("the Makefile sets no CONTROLLER_GEN_VERSION")
	}
	if string(m[1]) != golang.ControllerGenVersion {
		t.Errorf("ControllerGenVersion = %s, the Makefile pins %s: keep them in step", golang.ControllerGenVersion, m[1])
	}
}

func TestDefaults(t *testing.T) {
	for name, tc := range map[string]struct {
		project  scaffold.Project
		wantRepo string
		wantErr  string
	}{
		"if no module path is given, then it is <domain>/<name>": {
			project:  scaffold.Project{Name: "widgets", Domain: "example.com", PolyopVersion: "0.1.0"},
			wantRepo: "example.com/widgets",
		},
		"if a module path is given, then it is kept": {
			project:  scaffold.Project{Name: "widgets", Domain: "example.com", Repo: "github.com/me/widgets", PolyopVersion: "v0.1.0"},
			wantRepo: "github.com/me/widgets",
		},
		"if polyop is a development build, then the SDK must come from a checkout": {
			project: scaffold.Project{Name: "widgets", Domain: "example.com", PolyopVersion: "dev"},
			wantErr: "pass --sdk-source",
		},
		"if polyop is a development build with an SDK checkout, then it is fine": {
			project:  scaffold.Project{Name: "widgets", Domain: "example.com", PolyopVersion: "dev", SDKSource: "/src/polyop"},
			wantRepo: "example.com/widgets",
		},
		"if the module path is not one, then it is refused": {
			project: scaffold.Project{Name: "widgets", Domain: "example.com", Repo: "a b", PolyopVersion: "0.1.0"},
			wantErr: "use a Go module path",
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := tc.project
			err := golang.Scaffolder{}.Defaults(&p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Repo != tc.wantRepo {
				t.Errorf("repo = %q, want %q", p.Repo, tc.wantRepo)
			}
			if strings.Join(p.Sidecar.Command, " ") != "bin/sidecar" || strings.Join(p.Sidecar.Build, " ") != "go build -o bin/sidecar ./cmd/sidecar" {
				t.Errorf("sidecar = %+v", p.Sidecar)
			}
		})
	}
}

// newProject runs polyop init for a Go project in a temporary folder.
func newProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	_, err := scaffold.Init(scaffold.InitOptions{
		Dir: dir, Name: "widgets", Language: scaffold.Go, Domain: "example.com", Version: "0.1.0", SDKSource: repoRoot(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func read(t *testing.T, dir, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// checkGoFiles checks that every Go file of the project parses and is
// formatted as gofmt formats it.
func checkGoFiles(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if _, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments); err != nil {
			t.Errorf("%s does not parse: %v", path, err)
			return nil
		}
		if out, err := format.Source(src); err != nil || string(out) != string(src) {
			t.Errorf("%s is not gofmt-ed", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestInitWritesAModuleOnTheSDK(t *testing.T) {
	dir := newProject(t)
	gomod := read(t, dir, "go.mod")
	for _, want := range []string{
		"module example.com/widgets\n",
		"github.com/polyop/polyop/sdk/go v0.1.0",
		"sigs.k8s.io/controller-runtime v0.25.2",
		"replace github.com/polyop/polyop/sdk/go => " + repoRoot(t) + "/sdk/go",
	} {
		if !strings.Contains(gomod, want) {
			t.Errorf("go.mod has no %q:\n%s", want, gomod)
		}
	}
	main := read(t, dir, "cmd/sidecar/main.go")
	for _, marker := range []string{"+polyop:scaffold:imports", "+polyop:scaffold:scheme", "+polyop:scaffold:controllers", "+polyop:scaffold:webhooks"} {
		if !strings.Contains(main, marker) {
			t.Errorf("main.go has no %s marker", marker)
		}
	}
	for _, file := range []string{"cmd/sidecar/main_test.go", "Dockerfile", ".gitignore", "hack/boilerplate.go.txt", "api/doc.go", "internal/controller/doc.go", scaffold.ProjectFile} {
		read(t, dir, file)
	}
	checkGoFiles(t, dir)
}

func TestASecondKindKeepsTheFirst(t *testing.T) {
	dir := newProject(t)
	for _, kind := range []string{"Frigate", "Destroyer"} {
		if _, err := scaffold.CreateAPI(scaffold.APIOptions{Dir: dir, Group: "ship", Version: "v1", Kind: kind, Namespaced: true, Resource: true, Controller: true}); err != nil {
			t.Fatal(err)
		}
		// One handler at a time: the second joins the first in its file.
		for _, o := range []scaffold.WebhookOptions{{Defaulting: true}, {Validation: true}} {
			o.Dir, o.Group, o.Version, o.Kind = dir, "ship", "v1", kind
			if _, err := scaffold.CreateWebhook(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, kind := range []string{"frigate", "destroyer"} {
		Kind := strings.ToUpper(kind[:1]) + kind[1:]
		webhook := read(t, dir, "internal/webhook/v1/"+kind+"_webhook.go")
		for _, want := range []string{"WithDefaulter(&" + Kind + "CustomDefaulter{}).", "WithValidator(&" + Kind + "CustomValidator{}).", "func validate" + Kind + "(", `"unicode/utf8"`} {
			if n := strings.Count(webhook, want); n != 1 {
				t.Errorf("%s_webhook.go has %q %d times, want once", kind, want, n)
			}
		}
		test := read(t, dir, "internal/webhook/v1/"+kind+"_webhook_test.go")
		for _, want := range []string{"func Test" + Kind + "DefaulterFillsTheMessage(", "func Test" + Kind + "ValidatorLimitsTheMessage("} {
			if n := strings.Count(test, want); n != 1 {
				t.Errorf("%s_webhook_test.go has %q %d times, want once", kind, want, n)
			}
		}
	}
	main := read(t, dir, "cmd/sidecar/main.go")
	for _, want := range []string{
		`shipv1 "example.com/widgets/api/v1"`,
		`"example.com/widgets/internal/controller"`,
		`webhookshipv1 "example.com/widgets/internal/webhook/v1"`,
		"shipv1.AddToScheme(scheme)",
		"(&controller.FrigateReconciler{}).SetupWithServer(srv)",
		"(&controller.DestroyerReconciler{}).SetupWithServer(srv)",
		"webhookshipv1.SetupFrigateWebhookWithServer(srv)",
		"webhookshipv1.SetupDestroyerWebhookWithServer(srv)",
	} {
		if n := strings.Count(main, want); n != 1 {
			t.Errorf("main.go has %q %d times, want once:\n%s", want, n, main)
		}
	}
	deepcopy := read(t, dir, "api/v1/zz_generated.deepcopy.go")
	for _, kind := range []string{"Frigate", "FrigateList", "FrigateStatus", "Destroyer", "DestroyerList", "DestroyerStatus"} {
		if !strings.Contains(deepcopy, "func (in *"+kind+") DeepCopyInto(") {
			t.Errorf("zz_generated.deepcopy.go has no DeepCopyInto of %s", kind)
		}
	}
	types := read(t, dir, "api/v1/frigate_types.go")
	for _, marker := range []string{
		"+kubebuilder:object:root=true", "+kubebuilder:subresource:status", "+kubebuilder:storageversion",
		"+kubebuilder:resource:path=frigates,scope=Namespaced", "+listType=map", "+listMapKey=type",
		`+kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"`,
	} {
		if !strings.Contains(types, marker) {
			t.Errorf("frigate_types.go has no %s", marker)
		}
	}
	// controller-gen reads a comment line that starts with + as a marker:
	// the scaffolded comments have none but the markers themselves.
	for _, line := range strings.Split(types, "\n") {
		if text := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "//")); strings.HasPrefix(text, "+") &&
			!strings.HasPrefix(text, "+kubebuilder:") && text != "+optional" && !strings.HasPrefix(text, "+list") {
			t.Errorf("frigate_types.go has a line controller-gen reads as a marker: %q", line)
		}
	}
	if n := strings.Count(types, "+kubebuilder:"); n != 7 {
		t.Errorf("frigate_types.go has %d kubebuilder markers, want the 7 it is written with", n)
	}
	if gv := read(t, dir, "api/v1/groupversion_info.go"); !strings.Contains(gv, "+groupName=ship.example.com") {
		t.Errorf("groupversion_info.go has no +groupName:\n%s", gv)
	}
	checkGoFiles(t, dir)
}

func TestAClusterScopedKindHasNoChild(t *testing.T) {
	dir := newProject(t)
	if _, err := scaffold.CreateAPI(scaffold.APIOptions{Dir: dir, Group: "fleet", Version: "v1alpha1", Kind: "Admiralty", Resource: true, Controller: true}); err != nil {
		t.Fatal(err)
	}
	if types := read(t, dir, "api/v1alpha1/admiralty_types.go"); !strings.Contains(types, "+kubebuilder:resource:path=admiralties,scope=Cluster") {
		t.Errorf("the types are not cluster-scoped:\n%s", types)
	}
	if c := read(t, dir, "internal/controller/admiralty_controller.go"); strings.Contains(c, "ConfigMap") || !strings.Contains(c, "conditions.MarkTrue") {
		t.Errorf("the reconciler of a cluster-scoped kind declares a child, or no Ready:\n%s", c)
	}
	checkGoFiles(t, dir)
}

func TestConversionWritesTheHubAndItsSpokes(t *testing.T) {
	dir := newProject(t)
	for _, v := range []string{"v1", "v2"} {
		if _, err := scaffold.CreateAPI(scaffold.APIOptions{Dir: dir, Group: "ship", Version: v, Kind: "Frigate", Namespaced: true, Resource: true, Controller: v == "v1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := scaffold.CreateWebhook(scaffold.WebhookOptions{Dir: dir, Group: "ship", Version: "v2", Kind: "Frigate", Conversion: true}); err != nil {
		t.Fatal(err)
	}
	if hub := read(t, dir, "api/v1/frigate_conversion.go"); !strings.Contains(hub, "func (*Frigate) Hub() {}") {
		t.Errorf("v1 is not the hub:\n%s", hub)
	}
	spoke := read(t, dir, "api/v2/frigate_conversion.go")
	for _, want := range []string{"func (src *Frigate) ConvertTo(", "func (dst *Frigate) ConvertFrom("} {
		if !strings.Contains(spoke, want) {
			t.Errorf("v2 has no %s", want)
		}
	}
	read(t, dir, "api/v2/frigate_conversion_test.go")
	if strings.Contains(read(t, dir, "api/v2/frigate_types.go"), "+kubebuilder:storageversion") {
		t.Error("v2 is a storage version too: the first version is the only one")
	}
	// The hub had no webhooks: a builder of its own registers the
	// conversion.
	main := read(t, dir, "cmd/sidecar/main.go")
	if !strings.Contains(main, "webhookshipv1.SetupFrigateWebhookWithServer(srv)") || !strings.Contains(main, "shipv2.AddToScheme(scheme)") {
		t.Errorf("main.go registers no conversion:\n%s", main)
	}

	// A third version of a kind that converts converts at once.
	if _, err := scaffold.CreateAPI(scaffold.APIOptions{Dir: dir, Group: "ship", Version: "v3", Kind: "Frigate", Namespaced: true, Resource: true}); err != nil {
		t.Fatal(err)
	}
	if spoke := read(t, dir, "api/v3/frigate_conversion.go"); !strings.Contains(spoke, "func (src *Frigate) ConvertTo(dstRaw conversion.Hub) error") {
		t.Errorf("v3 does not convert to the hub:\n%s", spoke)
	}
	if p, _, err := scaffold.LoadProject(dir); err != nil || !p.FindResource("ship", "v3", "Frigate").Webhooks.Conversion {
		t.Errorf("the PROJECT file does not record v3's conversion (%v)", err)
	}
	checkGoFiles(t, dir)
}

func TestTasks(t *testing.T) {
	tasks := golang.Scaffolder{}.Tasks(&scaffold.Project{Name: "widgets", Repo: "example.com/widgets"})
	if tasks.Stamp == "" || !strings.Contains(strings.Join(tasks.Setup, "\n"), "touch "+tasks.Stamp) {
		t.Errorf("Setup %q does not make its stamp %q", tasks.Setup, tasks.Stamp)
	}
	if len(tasks.Build) == 0 || len(tasks.Test) == 0 || len(tasks.Lint) == 0 || !strings.Contains(tasks.Readme, "controller-gen") {
		t.Errorf("tasks = %+v", tasks)
	}
}
