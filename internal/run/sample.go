package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/polyop/polyop/internal/scaffold"
)

// pollInterval is how often the run looks at the samples while it waits.
const pollInterval = 250 * time.Millisecond

// requestTimeout bounds each request the run makes to the API server.
const requestTimeout = 10 * time.Second

// sample is one object of the example's config/samples.
type sample struct {
	gvk schema.GroupVersionKind
	key client.ObjectKey

	// resource is the plural resource name kubectl knows the kind by.
	resource string
	// namespaced tells whether the kind lives in namespaces.
	namespaced bool
}

func (s sample) String() string {
	if s.namespaced {
		return fmt.Sprintf("%s %s/%s", s.gvk.Kind, s.key.Namespace, s.key.Name)
	}
	return fmt.Sprintf("%s %s", s.gvk.Kind, s.key.Name)
}

// applySamples applies the project's samples with kubectl, as a user would.
func (r *runner) applySamples(ctx context.Context) ([]sample, error) {
	dir := filepath.Join(r.root, filepath.FromSlash(scaffold.SamplesDir))
	files, err := manifestFiles(dir, false)
	if err != nil {
		return nil, err
	}
	objs, err := readManifests(files)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no samples in %s", dir)
	}

	var samples []sample
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := r.cluster.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("the sample %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		s := sample{
			gvk:        gvk,
			key:        client.ObjectKey{Name: obj.GetName()},
			resource:   mapping.Resource.Resource,
			namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace,
		}
		if s.namespaced {
			s.key.Namespace = obj.GetNamespace()
			if s.key.Namespace == "" {
				s.key.Namespace = r.cluster.namespace
			}
		}
		samples = append(samples, s)
	}

	args := []string{"apply"}
	for _, f := range files {
		args = append(args, "-f", r.rel(f))
	}
	if _, err := r.runKubectl(ctx, false, args...); err != nil {
		return nil, err
	}
	return samples, nil
}

// waitReady waits until every sample has a Ready condition that is True for
// its current generation, for at most the --timeout.
func (r *runner) waitReady(ctx context.Context, samples []sample) error {
	r.console.printf("waiting up to %s for %d sample(s) to be Ready", r.o.Timeout, len(samples))
	waitCtx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()

	pending := samples
	last := map[sample]string{} // what each pending sample last looked like
	for {
		var still []sample
		for _, s := range pending {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(s.gvk)
			if err := r.get(ctx, s.key, obj); err != nil {
				last[s] = err.Error()
				still = append(still, s)
				continue
			}
			ready, state := readiness(obj)
			if !ready {
				last[s] = state
				still = append(still, s)
				continue
			}
			r.console.printf("%s is Ready: %s", s, state)
		}
		if pending = still; len(pending) == 0 {
			return nil
		}

		select {
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var lines []string
			for _, s := range pending {
				lines = append(lines, fmt.Sprintf("%s: %s", s, last[s]))
			}
			return fmt.Errorf("timed out after %s waiting for the samples to be Ready:\n  %s", r.o.Timeout, strings.Join(lines, "\n  "))
		case ch := <-r.exited:
			return ch.exitError()
		case <-r.sidecarDone():
			return r.sidecar.ExitedError()
		case <-ticker.C:
		}
	}
}

// get reads one object, giving up after requestTimeout.
func (r *runner) get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return r.cluster.client.Get(ctx, key, obj)
}

// readiness tells whether obj's Ready condition is True for its current
// generation, and describes the condition.
func readiness(obj *unstructured.Unstructured) (bool, string) {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		cond, ok := c.(map[string]any)
		if !ok || cond["type"] != "Ready" {
			continue
		}
		status, _ := cond["status"].(string)
		reason, _ := cond["reason"].(string)
		message, _ := cond["message"].(string)
		state := fmt.Sprintf("Ready=%s reason=%q message=%q", status, reason, message)
		if observed, found, _ := unstructured.NestedInt64(cond, "observedGeneration"); found && observed < obj.GetGeneration() {
			return false, fmt.Sprintf("%s (for generation %d, the object is at %d)", state, observed, obj.GetGeneration())
		}
		return status == "True", state
	}
	return false, "no Ready condition yet"
}

// show prints the samples the way kubectl lists them, then each one's status.
func (r *runner) show(ctx context.Context, samples []sample) error {
	listed := map[string]bool{}
	for _, s := range samples {
		args := []string{"get", s.resource}
		if s.namespaced && s.key.Namespace != r.cluster.namespace {
			args = append(args, "--namespace", s.key.Namespace)
		}
		args = append(args, "-o", "wide")
		if line := strings.Join(args, " "); !listed[line] {
			listed[line] = true
			out, err := r.runKubectl(ctx, true, args...)
			if err != nil {
				return err
			}
			r.console.block(out)
		}
	}
	for _, s := range samples {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(s.gvk)
		if err := r.get(ctx, s.key, obj); err != nil {
			return fmt.Errorf("reading %s: %w", s, err)
		}
		status, err := yaml.Marshal(obj.Object["status"])
		if err != nil {
			return fmt.Errorf("printing the status of %s: %w", s, err)
		}
		r.console.printf("status of %s:", s)
		r.console.block(indent(string(status), "  "))
	}
	return nil
}

// printHints says how to look at the running project.
func (r *runner) printHints(samples []sample) {
	p := r.console.printf
	p("polyop is running the project; try, in another terminal:")
	if r.cluster.kubeconfig != "" {
		p("  export KUBECONFIG=%s", r.cluster.kubeconfig)
	}
	if r.kubectl != "" && filepath.Dir(r.kubectl) == r.cluster.assets {
		p("  export PATH=%s:$PATH", r.cluster.assets)
	}
	if len(samples) == 0 {
		p("  %s", applySamplesCommand(r.root))
	} else {
		s := samples[0]
		ns := ""
		if s.namespaced && s.key.Namespace != r.cluster.namespace {
			ns = " --namespace " + s.key.Namespace
		}
		p("  kubectl get %s%s -o wide --watch", s.resource, ns)
		p("  kubectl get %s %s%s -o yaml", strings.ToLower(s.gvk.Kind), s.key.Name, ns)
		p("  kubectl edit %s %s%s", strings.ToLower(s.gvk.Kind), s.key.Name, ns)
	}
	p("press Ctrl-C to stop")
}

// kustomizationFiles are the names kustomize reads a folder's kustomization
// from.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// applySamplesCommand is the kubectl command that applies the samples of the
// project at root, as a user would paste it there: kubectl apply -k when
// config/samples holds a kustomization (polyop init writes one, and kubectl
// apply -f of the folder refuses it: it is no object), else kubectl apply -f.
func applySamplesCommand(root string) string {
	for _, name := range kustomizationFiles {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(scaffold.SamplesDir), name)); err == nil {
			return "kubectl apply -k " + scaffold.SamplesDir
		}
	}
	return "kubectl apply -f " + scaffold.SamplesDir
}

// runKubectl runs kubectl against the cluster, showing the command as a user
// would type it. With capture it returns kubectl's output; otherwise it
// prints it.
func (r *runner) runKubectl(ctx context.Context, capture bool, args ...string) (string, error) {
	r.console.printf("$ kubectl %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, r.kubectl, append(append([]string{}, r.cluster.kubeconfigArgs...), args...)...)
	cmd.Dir = r.root
	cmd.Env = environ(r.cluster.env)
	stdout, stderr := r.console.prefixed("[kubectl] ")
	defer func() { _, _ = stdout.Close(), stderr.Close() }()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if capture {
		cmd.Stdout = &out
	}
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return "", fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
		}
		return "", fmt.Errorf("running kubectl: %w", err)
	}
	return out.String(), nil
}

// rel returns path relative to the repository root, as a user there would
// type it.
func (r *runner) rel(path string) string {
	if rel, err := filepath.Rel(r.root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// indent puts prefix before every line of s.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}
