package scaffold

import (
	"fmt"
	"path"
	"strings"
)

// SampleMessage is the spec.message of every scaffolded sample: each
// language's scaffolded types have a spec.message, which the scaffolded
// reconciler copies into a ConfigMap.
const SampleMessage = "Hello from polyop"

// SampleName is the name of the sample object of r.
func SampleName(r *Resource) string { return strings.ToLower(r.Kind) + "-sample" }

// writeConfig writes the parts of config/ every project has, whatever its
// language.
func writeConfig(w *Writer, _ *Project) error {
	return w.WriteFile(path.Join(SamplesDir, "kustomization.yaml"), []byte(samplesKustomization))
}

const samplesKustomization = `## One sample per kind: polyop create api adds them here.
resources:
# +polyop:scaffold:samples
`

// writeSample writes r's sample and lists it in config/samples.
func writeSample(w *Writer, _ *Project, r *Resource) error {
	sample := fmt.Sprintf(`apiVersion: %s
kind: %s
metadata:
  name: %s
spec:
  message: %s
`, r.APIVersion(), r.Kind, SampleName(r), SampleMessage)
	if err := w.WriteFile(r.SampleFile(), []byte(sample)); err != nil {
		return err
	}
	return w.Insert(path.Join(SamplesDir, "kustomization.yaml"), "+polyop:scaffold:samples", "- "+path.Base(r.SampleFile()))
}
