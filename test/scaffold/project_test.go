// Package scaffold_test makes a polyop project in each language as a user
// would, outside this repository, and checks that everything the README
// promises of it works: its own make targets, the CRDs and manifests polyop
// generate writes, polyop run against a real API server (the sample
// reconciled, an invalid object refused by kubectl, conversion and
// defaulting through the webhooks it wires, nothing left behind on SIGTERM)
// and polyop render.
package scaffold_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/testenv"
)

// timeout bounds each step that waits: installing a project's dependencies
// and building it on a loaded machine take minutes.
const timeout = 10 * time.Minute

// project is how one language's project is made and what its tests print.
type project struct {
	language string
	// initArgs are polyop init's language-specific flags.
	initArgs []string
	// passed matches the output of make test when every scaffolded test
	// ran and passed.
	passed *regexp.Regexp
	// prepare runs before the project's first make target.
	prepare func(t *testing.T)
	// deprecated, when set, is what the SDK prints when the project uses
	// one of its deprecated shapes: make test's output and the sidecar's
	// under polyop run must not hold it.
	deprecated string
}

var projects = []project{
	{
		language: "go",
		initArgs: []string{"--repo", "example.com/fleet"},
		passed:   regexp.MustCompile(`(?m)^ok\s+example\.com/fleet/internal/controller\s`),
	},
	{
		language: "python",
		passed:   regexp.MustCompile(`(?m)^=+ [1-9][0-9]* passed in `),
	},
	{
		language: "typescript",
		passed:   regexp.MustCompile(`(?m)^# pass [1-9][0-9]*\n# fail 0$`),
		// Node.js prints "(node:PID) [POLYOP_…] DeprecationWarning: …", which
		// node --test passes on; the SDK's logger writes "Deprecated: …".
		deprecated: "Deprecat",
		// Setup packs the checkout's SDK (make dist-typescript, which runs
		// tsc -b on it): build it first under the lock the other suites'
		// builds take, so that Setup's tsc finds it up to date and writes
		// nothing while they read it.
		prepare: func(t *testing.T) {
			if err := testenv.BuildTypeScript("sdk/typescript"); err != nil {
				t.Fatal(err)
			}
		},
	},
}

func TestProjects(t *testing.T) {
	if testing.Short() {
		t.Skip("installs each language's dependencies, builds projects and starts control planes: not with -short")
	}
	// envtest logs through controller-runtime: its errors to stderr.
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	polyop, err := testenv.Build("./cmd/polyop")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(testenv.CleanBuilds)
	for _, p := range projects {
		t.Run(p.language, func(t *testing.T) { testProject(t, polyop, p) })
	}
}

// testProject makes a project of kind Frigate (v1 with defaulting and
// validation, v2 converted), plus a cluster-scoped Harbor added after a
// first make manifests, and checks it.
func testProject(t *testing.T, polyop string, lang project) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*timeout)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "fleet")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The project lives outside this repository: no go.work reaches it,
	// and its Makefile calls the polyop under test.
	env := []string{"GOWORK=off", "POLYOP=" + polyop}
	run := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		t.Logf("%s %s: %s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Second))
		return string(out)
	}

	run(t, polyop, append([]string{"init", "--language", lang.language, "--domain", "example.com", "--sdk-source", testenv.RepoRoot()}, lang.initArgs...)...)
	run(t, polyop, "create", "api", "--group", "ship", "--version", "v1", "--kind", "Frigate")
	run(t, polyop, "create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Frigate", "--defaulting", "--programmatic-validation")
	run(t, polyop, "create", "api", "--group", "ship", "--version", "v2", "--kind", "Frigate", "--controller=false")
	run(t, polyop, "create", "webhook", "--group", "ship", "--version", "v2", "--kind", "Frigate", "--conversion")
	if lang.prepare != nil {
		lang.prepare(t)
	}
	// A kind added after a first generate: its code joins what generate
	// wrote (Go's deep copy functions, for one), and the project still
	// builds, tests and generates.
	run(t, "make", "manifests")
	run(t, polyop, "create", "api", "--group", "ship", "--version", "v1", "--kind", "Harbor", "--namespaced=false")
	p, _, err := scaffold.LoadProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	frigate, harbor := p.FindResource("ship", "v1", "Frigate"), p.FindResource("ship", "v1", "Harbor")

	t.Run("make test passes", func(t *testing.T) {
		out := run(t, "make", "test")
		if !lang.passed.MatchString(out) {
			t.Errorf("make test printed no %q:\n%s", lang.passed, out)
		}
		if lang.deprecated != "" && strings.Contains(out, lang.deprecated) {
			t.Errorf("make test printed %q: the scaffolded code uses a deprecated shape of the SDK:\n%s", lang.deprecated, out)
		}
	})
	t.Run("make lint passes", func(t *testing.T) { run(t, "make", "lint") })
	if !t.Run("make manifests writes the CRDs and the RBAC and webhooks", func(t *testing.T) {
		run(t, "make", "manifests")
		checkCRD(t, filepath.Join(dir, frigate.CRDFile()), frigate.CRDName(), "v1", "v2")
		checkCRD(t, filepath.Join(dir, harbor.CRDFile()), harbor.CRDName(), "v1")
		role := readFile(t, filepath.Join(dir, scaffold.RoleFile))
		for _, want := range []string{"frigates", "frigates/status", "configmaps"} {
			if !strings.Contains(role, "- "+want+"\n") {
				t.Errorf("%s grants nothing on %s:\n%s", scaffold.RoleFile, want, role)
			}
		}
		webhooks := readFile(t, filepath.Join(dir, scaffold.WebhooksFile))
		for _, want := range []string{"kind: MutatingWebhookConfiguration", "kind: ValidatingWebhookConfiguration"} {
			if !strings.Contains(webhooks, want) {
				t.Errorf("%s has no %s:\n%s", scaffold.WebhooksFile, want, webhooks)
			}
		}
	}) {
		return
	}

	t.Run("polyop run reconciles the sample and wires the webhooks and removes them on SIGTERM", func(t *testing.T) {
		testRun(t, ctx, polyop, dir, frigate, lang.deprecated)
	})

	sidecar := append([]string{"--"}, p.Sidecar.Command...)
	t.Run("render reconciles the sample into its ConfigMap", func(t *testing.T) {
		out := run(t, polyop, append([]string{"render", "--object", frigate.SampleFile()}, sidecar...)...)
		var got struct {
			Reconcile struct {
				DesiredChildren []map[string]any `json:"desiredChildren"`
			}
		}
		if err := yaml.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(got.Reconcile.DesiredChildren) != 1 {
			t.Fatalf("render: want one child:\n%s", out)
		}
		child := &unstructured.Unstructured{Object: got.Reconcile.DesiredChildren[0]}
		message, _, _ := unstructured.NestedString(child.Object, "data", "message")
		if child.GetKind() != "ConfigMap" || child.GetName() != scaffold.SampleName(frigate) || message != scaffold.SampleMessage {
			t.Errorf("render: want the ConfigMap %s with data.message %q:\n%s", scaffold.SampleName(frigate), scaffold.SampleMessage, out)
		}
	})
	t.Run("render refuses a message of 100 characters naming spec.message", func(t *testing.T) {
		long := filepath.Join(t.TempDir(), "long.yaml")
		writeFile(t, long, strings.Replace(readFile(t, filepath.Join(dir, frigate.SampleFile())), scaffold.SampleMessage, strings.Repeat("x", 100), 1))
		out := run(t, polyop, append([]string{"render", "--object", long, "--admission", "create"}, sidecar...)...)
		var got struct {
			Admission struct {
				Validate struct {
					Allowed bool
					Denied  struct {
						Causes []struct{ Field, Reason string }
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		v := got.Admission.Validate
		if v.Allowed || len(v.Denied.Causes) != 1 || v.Denied.Causes[0].Field != "spec.message" || v.Denied.Causes[0].Reason != "FieldValueTooLong" {
			t.Errorf("render --admission create: want a denial of spec.message as too long:\n%s", out)
		}
	})
}

// testRun runs polyop run in the project against a control plane the test
// owns, so that it can look at the cluster after polyop has gone. The
// output of polyop run, the sidecar's included, must not hold deprecated
// (when not empty).
func testRun(t *testing.T, ctx context.Context, polyop, dir string, frigate *scaffold.Resource, deprecated string) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	}()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	proc, err := testenv.StartProcessWith("polyop run", polyop,
		[]string{"run", "--kubeconfig", env.Kubeconfig, "--apply-samples", "--timeout", timeout.String()},
		testenv.ProcessOptions{Logger: t, Dir: dir, Env: []string{"GOWORK=off"}})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Kill()
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := proc.WaitForOutput(waitCtx, "polyop is running the project"); err != nil {
		t.Fatal(err)
	}

	key := client.ObjectKey{Namespace: "default", Name: scaffold.SampleName(frigate)}
	at := func(version string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: frigate.APIGroup(), Version: version, Kind: frigate.Kind})
		return u
	}
	sample := at("v1")
	if err := c.Get(ctx, key, sample); err != nil {
		t.Fatal(err)
	}
	conditions, _, _ := unstructured.NestedSlice(sample.Object, "status", "conditions")
	var typed []metav1.Condition
	for _, raw := range conditions {
		var cond metav1.Condition
		data, _ := yaml.Marshal(raw)
		if err := yaml.Unmarshal(data, &cond); err == nil {
			typed = append(typed, cond)
		}
	}
	if !meta.IsStatusConditionTrue(typed, "Ready") {
		t.Errorf("the sample is not Ready after polyop run said so: %v", conditions)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, cm); err != nil || cm.Data["message"] != scaffold.SampleMessage {
		t.Errorf("the sample's ConfigMap: %v, data %v; want message %q", err, cm.Data, scaffold.SampleMessage)
	}
	v2 := at("v2")
	if err := c.Get(ctx, key, v2); err != nil {
		t.Errorf("reading the sample at v2, through the conversion webhook: %v", err)
	} else if message, _, _ := unstructured.NestedString(v2.Object, "spec", "message"); message != scaffold.SampleMessage {
		t.Errorf("the sample at v2 has spec.message %q, want %q", message, scaffold.SampleMessage)
	}

	kubectl := func(manifest string) (string, error) {
		cmd := exec.CommandContext(ctx, env.Kubectl, "--kubeconfig", env.Kubeconfig, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	object := func(name, message string) string {
		return "apiVersion: " + frigate.APIVersion() + "\nkind: " + frigate.Kind + "\nmetadata:\n  name: " + name +
			"\n  namespace: default\nspec:\n  message: \"" + message + "\"\n"
	}
	out, err := kubectl(object("too-long", strings.Repeat("x", 100)))
	if err == nil || !strings.Contains(out, "spec.message") || !strings.Contains(strings.ToLower(out), "too long") {
		t.Errorf("kubectl apply of a 100-character message: %v, want it refused naming spec.message as too long:\n%s", err, out)
	}
	if out, err := kubectl(object("defaulted", "")); err != nil {
		t.Errorf("kubectl apply of an empty message: %v\n%s", err, out)
	} else {
		got := at("v1")
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "defaulted"}, got); err != nil {
			t.Error(err)
		} else if message, _, _ := unstructured.NestedString(got.Object, "spec", "message"); message != scaffold.SampleMessage {
			t.Errorf("an empty message became %q, want the default %q", message, scaffold.SampleMessage)
		}
	}

	if err := syscall.Kill(proc.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := proc.Wait(2 * time.Minute); err != nil || code != 0 {
		t.Errorf("polyop run after SIGTERM: exit code %d, %v; want 0\n%s", code, err, testenv.Tail(proc.Output(), 30))
	}
	if deprecated != "" {
		for _, line := range strings.Split(proc.Output(), "\n") {
			if strings.Contains(line, deprecated) {
				t.Errorf("polyop run printed %q: the sidecar uses a deprecated shape of the SDK: %s", deprecated, line)
			}
		}
	}
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	for _, list := range []client.ObjectList{&validating, &mutating} {
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(validating.Items) + len(mutating.Items); n != 0 {
		t.Errorf("polyop run left %d webhook configuration(s) behind", n)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: frigate.CRDName()}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		t.Errorf("polyop run left the CRD converting through its webhook, which is gone")
	}
}

// checkCRD checks that file is the CRD name with versions (sorted), each
// with a status subresource and a Ready column, the first one stored.
func checkCRD(t *testing.T, file, name string, versions ...string) {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(readFile(t, file)), &crd); err != nil {
		t.Fatal(err)
	}
	var got, storage []string
	for _, v := range crd.Spec.Versions {
		got = append(got, v.Name)
		if v.Storage {
			storage = append(storage, v.Name)
		}
		if v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("%s %s: no status subresource", name, v.Name)
		}
		ready := false
		for _, c := range v.AdditionalPrinterColumns {
			ready = ready || c.Name == "Ready"
		}
		if !ready {
			t.Errorf("%s %s: no Ready column", name, v.Name)
		}
	}
	// The API server orders versions by their priority, whatever their
	// order in the file.
	slices.Sort(got)
	if crd.Name != name || strings.Join(got, ",") != strings.Join(versions, ",") || strings.Join(storage, ",") != versions[0] {
		t.Errorf("%s: CRD %s with versions %v, storage %v; want %s with %v, storage %s", file, crd.Name, got, storage, name, versions, versions[0])
	}
}

func readFile(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func writeFile(t *testing.T, file, content string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
