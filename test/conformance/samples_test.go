package conformance

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/polyop/polyop/internal/testenv"
)

// TestSamplesAreValid creates every object of the examples' samples with a
// server-side dry run: the API server validates them against the CRDs.
func TestSamplesAreValid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, example := range []string{"memcached", "website"} {
		files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "examples", "go", example, "config", "samples", "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no samples: %v", example, err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range strings.Split(string(data), "\n---\n") {
				u := &unstructured.Unstructured{}
				if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				u.SetNamespace(f.ns)
				if err := k8s.Create(context.Background(), u, client.DryRunAll); err != nil {
					t.Errorf("%s: %s %s: %v", filepath.Base(file), u.GetKind(), u.GetName(), err)
				}
			}
		}
	}
}
