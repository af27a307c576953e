package run

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/polyop/polyop/internal/testenv"
)

func TestPrefixWriter(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		writes []string
		want   string
	}{
		"a whole line is printed after the prefix": {
			writes: []string{"hello\n"},
			want:   "[x] hello\n",
		},
		"a line split over writes is printed once, whole": {
			writes: []string{"hel", "lo\nwor", "ld\n"},
			want:   "[x] hello\n[x] world\n",
		},
		"a last line without a newline is printed on close": {
			writes: []string{"one\ntwo"},
			want:   "[x] one\n[x] two\n",
		},
		"empty lines keep their prefix": {
			writes: []string{"\n\n"},
			want:   "[x] \n[x] \n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			c := &console{stdout: &buf, stderr: &buf}
			w, _ := c.prefixed("[x] ")
			for _, s := range tc.writes {
				if _, err := w.Write([]byte(s)); err != nil {
					t.Fatal(err)
				}
			}
			_ = w.Close()
			if got := buf.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		generation int64
		conditions []any
		want       bool
	}{
		"if there are no conditions, then it is not ready": {
			want: false,
		},
		"if Ready is True, then it is ready": {
			conditions: []any{map[string]any{"type": "Ready", "status": "True"}},
			want:       true,
		},
		"if Ready is False, then it is not ready": {
			conditions: []any{map[string]any{"type": "Ready", "status": "False", "reason": "Invalid"}},
			want:       false,
		},
		"if Ready is True for an older generation, then it is not ready": {
			generation: 3,
			conditions: []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(2)}},
			want:       false,
		},
		"if Ready is True for the current generation, then it is ready": {
			generation: 3,
			conditions: []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(3)}},
			want:       true,
		},
		"if only other conditions are True, then it is not ready": {
			conditions: []any{map[string]any{"type": "Active", "status": "True"}},
			want:       false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			obj := &unstructured.Unstructured{Object: map[string]any{}}
			obj.SetGeneration(tc.generation)
			if tc.conditions != nil {
				if err := unstructured.SetNestedSlice(obj.Object, tc.conditions, "status", "conditions"); err != nil {
					t.Fatal(err)
				}
			}
			if got, state := readiness(obj); got != tc.want {
				t.Errorf("readiness() = %v (%s), want %v", got, state, tc.want)
			}
		})
	}
}

func TestManifestFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"b.yaml", "a.yml", "c.json", "kustomization.yaml", "README.md", "bases/crd.yaml"} {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]struct {
		recursive bool
		want      []string
	}{
		"if not recursive, then only the folder's own manifests, sorted": {
			want: []string{"a.yml", "b.yaml", "c.json"},
		},
		"if recursive, then the manifests below it too": {
			recursive: true,
			want:      []string{"a.yml", "b.yaml", "bases/crd.yaml", "c.json"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files, err := manifestFiles(dir, tc.recursive)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range files {
				rel, _ := filepath.Rel(dir, f)
				got = append(got, filepath.ToSlash(rel))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFailedChecksNamesEachFailedReadinessCheck(t *testing.T) {
	t.Parallel()
	body := "[-]informers failed: reason withheld\n[-]sidecar failed: sidecar at unix:///tmp/s.sock is unreachable: connection refused\n[+]webhook-server ok\nhealthz check failed\n"
	want := "informers failed: reason withheld; sidecar failed: sidecar at unix:///tmp/s.sock is unreachable: connection refused"
	if got := failedChecks(strings.NewReader(body)); got != want {
		t.Errorf("failedChecks = %q, want %q", got, want)
	}
}

func TestPrintHintsGivesTheSamplesCommandOfTheirLayout(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		files []string
		want  string
	}{
		"if config/samples holds a kustomization, as polyop init writes it, then kubectl apply -k": {
			files: []string{"kustomization.yaml", "ship_v1_frigate.yaml"},
			want:  "[run]   kubectl apply -k config/samples\n",
		},
		"if it holds a Kustomization, then kubectl apply -k": {
			files: []string{"Kustomization", "ship_v1_frigate.yaml"},
			want:  "[run]   kubectl apply -k config/samples\n",
		},
		"if it holds only objects, then kubectl apply -f": {
			files: []string{"ship_v1_frigate.yaml"},
			want:  "[run]   kubectl apply -f config/samples\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			dir := filepath.Join(root, "config", "samples")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			r := newRunner(Options{}, &out, &out)
			r.root = root
			r.cluster = &runCluster{kubeconfig: "/tmp/polyop-run-1/kubeconfig"}
			r.printHints(nil)
			want := "[run] polyop is running the project; try, in another terminal:\n" +
				"[run]   export KUBECONFIG=/tmp/polyop-run-1/kubeconfig\n" + tc.want + "[run] press Ctrl-C to stop\n"
			if out.String() != want {
				t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
			}
		})
	}
}

func TestMissingKubeconfig(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	existing := filepath.Join(tmp, "config")
	if err := os.WriteFile(existing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(tmp, "polyop-run-2847561", "kubeconfig")
	const unset = "unset KUBECONFIG to get a local control plane (or the cluster of ~/.kube/config, when there is one), " +
		"or point KUBECONFIG at your cluster's kubeconfig"
	for name, tc := range map[string]struct {
		path     string
		fromFlag bool
		want     string // "" for no error
	}{
		"if the kubeconfig exists, then it is used":                     {path: existing},
		"if KUBECONFIG lists several files, then clientcmd merges them": {},
		"if KUBECONFIG is an earlier run's kubeconfig, gone with it, then it says so and how to get a cluster": {
			path: leftover,
			want: "KUBECONFIG is " + leftover + ", which does not exist: it is the kubeconfig an earlier polyop run printed, " +
				"and it went with the local control plane of that run when the run stopped; " + unset,
		},
		"if KUBECONFIG names another file that does not exist, then it names the variable": {
			path: filepath.Join(tmp, "gone"),
			want: "KUBECONFIG is " + filepath.Join(tmp, "gone") + ", which does not exist: " + unset,
		},
		"if a file named kubeconfig in another folder does not exist, then it is no earlier run's": {
			path: filepath.Join(tmp, "kubeconfig"),
			want: "KUBECONFIG is " + filepath.Join(tmp, "kubeconfig") + ", which does not exist: " + unset,
		},
		"if --kubeconfig names an earlier run's kubeconfig, then it names the flag": {
			path: leftover, fromFlag: true,
			want: "--kubeconfig is " + leftover + ", which does not exist: it is the kubeconfig an earlier polyop run printed, " +
				"and it went with the local control plane of that run when the run stopped; " +
				"pass --local for a local control plane, or point --kubeconfig at your cluster's kubeconfig",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := missingKubeconfig(tc.path, tc.fromFlag)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %q, want none", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRunWithAnEarlierRunsKubeconfigSaysItIsGone starts a run as make run
// does in a shell that still exports the KUBECONFIG an earlier run printed:
// it stops before it touches any cluster, saying so.
func TestRunWithAnEarlierRunsKubeconfigSaysItIsGone(t *testing.T) {
	leftover := filepath.Join(t.TempDir(), tmpDirPrefix+"2847561", "kubeconfig")
	t.Setenv("KUBECONFIG", leftover)
	var out bytes.Buffer
	r := newRunner(Options{}, &out, &out)
	r.root = filepath.Join(testenv.RepoRoot(), "examples", "go", "maintenancewindow")
	err := r.startCluster(t.Context())
	if want := "KUBECONFIG is " + leftover + ", which does not exist: it is the kubeconfig an earlier polyop run printed"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("startCluster: %v, want an error beginning %q", err, want)
	}
	if r.cluster != nil {
		t.Errorf("a cluster was set up: %+v", r.cluster)
	}
}
