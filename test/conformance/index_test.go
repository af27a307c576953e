package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/polyop/polyop/internal/testenv"
	"github.com/polyop/polyop/internal/testenv/controlplane"
	conformancev1 "github.com/polyop/polyop/test/conformance/indexsidecar/api/v1"
)

// TestAReconcilerListsByACustomIndexInASidecarAsInAManager runs one
// kubebuilder-style operator, unchanged, twice: in a controller-runtime
// manager (test/conformance/indexsidecar --standalone, its manager.go) and as
// a sidecar behind the host (its sidecar.go). Its controller and webhooks
// (indexsidecar/internal) import nothing of polyop: a Crew controller that
// lists its Jobs through a field index with a Go func (IndexField, as
// kubebuilder's CronJob tutorial does), creates the missing ones with a
// controller reference (Owns) and records them in its status, and a
// defaulting and a validating webhook (ctrl.NewWebhookManagedBy(mgr,
// &Crew{}).WithDefaulter(...).WithValidator(...)). The webhook configurations
// controller-gen writes from the kubebuilder markers are installed in the API
// server for each run, pointing at the manager's webhook server in one and at
// the host's in the other, so every create and update goes through admission.
//
// The same changes go through the API server in both runs: creates, an
// update, a create the webhook defaults, a create it refuses, and the deletion
// of a Job the controller then recreates. After each, the two namespaces must
// hold the same Crews (spec with its defaults, status), the same Jobs (pod spec,
// labels, controller reference) and the same refusals, with only UIDs,
// resource versions, times, managed fields and the namespaces' names left out.
//
// The reconciler never requeues: it converges on events alone. In the
// sidecar, a List by the Go index is answered from the sidecar's copy of the
// Jobs, fed by the host's Watch stream; the reconcile a Job's creation
// triggers reads that copy at or after the version the host names in the
// call (ReconcileRequest.cache_versions), so it lists that Job, as a
// manager's reconcile does. Without it, the Crew's status missed that Job
// until the next event, once in seven runs here.
//
// docs/migrating.md quotes indexsidecar's manager.go, sidecar.go and
// internal packages: keep them in step.
func TestAReconcilerListsByACustomIndexInASidecarAsInAManager(t *testing.T) {
	t.Parallel()
	inManager, inSidecar := newFixture(t), newFixture(t)

	mgrWebhooks := installCrewWebhooks(t, inManager)
	mgr := inManager.start("manager", indexBin, "--standalone", "--kubeconfig", env.Kubeconfig, "--namespace", inManager.ns,
		"--webhook-host", mgrWebhooks.LocalServingHost,
		"--webhook-port", strconv.Itoa(mgrWebhooks.LocalServingPort),
		"--webhook-cert-dir", mgrWebhooks.LocalServingCertDir)
	waitForWebhookServer(t, mgr)

	hostWebhooks := installCrewWebhooks(t, inSidecar)
	inSidecar.startSidecar(indexBin)
	host := inSidecar.startHost(
		"--webhook-host", hostWebhooks.LocalServingHost,
		"--webhook-port", strconv.Itoa(hostWebhooks.LocalServingPort),
		"--webhook-cert-dir", hostWebhooks.LocalServingCertDir)
	waitForWebhookServer(t, host)

	runs := map[string]*fixture{"manager": inManager, "sidecar": inSidecar}
	// refusals[run] are the errors the API server answered the run's
	// refused requests with.
	refusals := map[string][]string{}
	ctx := context.Background()

	// step does the same to both runs, waits until each reaches a state that
	// satisfies done, and checks that the two states are the same.
	step := func(what string, do func(run string, f *fixture), done func(f *fixture, s crewState) bool) {
		t.Helper()
		for run, f := range runs {
			do(run, f)
		}
		for run, f := range runs {
			testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("%s: the %s run is done", what, run), func() (bool, string) {
				s := crewStateOf(t, f.ns, refusals[run])
				return done(f, s), s.String()
			})
		}
		var got, want string
		testenv.Eventually(t, 3*time.Minute, what+": both runs leave the same state", func() (bool, string) {
			got = crewStateOf(t, inSidecar.ns, refusals["sidecar"]).String()
			want = crewStateOf(t, inManager.ns, refusals["manager"]).String()
			return got == want, fmt.Sprintf("the sidecar run left\n%s\nthe manager run left\n%s", got, want)
		})
		t.Logf("%s: both runs left\n%s", what, want)
	}
	create := func(f *fixture, name string, size *int32, image string) {
		t.Helper()
		crew := &conformancev1.Crew{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec:       conformancev1.CrewSpec{Size: size, Image: image},
		}
		if err := k8s.Create(ctx, crew); err != nil {
			t.Fatalf("creating Crew %s/%s: %v", f.ns, name, err)
		}
	}
	jobsAre := func(crew string, want ...string) func(s crewState) bool {
		return func(s crewState) bool {
			c, ok := s.Crews[crew]
			if !ok || !slices.Equal(c.Status.Jobs, want) {
				return false
			}
			for _, j := range want {
				if _, ok := s.Jobs[j]; !ok {
					return false
				}
			}
			return true
		}
	}

	step("creating Crews of 2 and 1 Jobs", func(_ string, f *fixture) {
		create(f, "alpha", new(int32(2)), "busybox:1.37")
		create(f, "beta", new(int32(1)), "busybox:1.37")
	}, func(_ *fixture, s crewState) bool {
		return jobsAre("alpha", "alpha-0", "alpha-1")(s) && jobsAre("beta", "beta-0")(s)
	})

	step("growing alpha to 3", func(_ string, f *fixture) {
		var alpha conformancev1.Crew
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "alpha"}, &alpha); err != nil {
			t.Fatal(err)
		}
		alpha.Spec.Size = new(int32(3))
		if err := k8s.Update(ctx, &alpha); err != nil {
			t.Fatalf("updating Crew %s/alpha: %v", f.ns, err)
		}
	}, func(_ *fixture, s crewState) bool {
		return jobsAre("alpha", "alpha-0", "alpha-1", "alpha-2")(s)
	})

	step("creating a Crew the webhook defaults", func(_ string, f *fixture) {
		create(f, "gamma", nil, "")
	}, func(_ *fixture, s crewState) bool {
		return jobsAre("gamma", "gamma-0")(s)
	})

	step("creating and growing Crews the webhook refuses", func(run string, f *fixture) {
		crew := &conformancev1.Crew{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "too-big"},
			Spec:       conformancev1.CrewSpec{Size: new(int32(9))},
		}
		err := k8s.Create(ctx, crew)
		var beta conformancev1.Crew
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "beta"}, &beta); err != nil {
			t.Fatal(err)
		}
		beta.Spec.Size = new(int32(0))
		refusals[run] = append(refusals[run], refusal(f.ns, err), refusal(f.ns, k8s.Update(ctx, &beta)))
	}, func(_ *fixture, s crewState) bool {
		_, created := s.Crews["too-big"]
		return !created && len(s.Refusals) == 2
	})

	// uids[run] is the UID of the Job the step deletes.
	uids := map[string]types.UID{}
	step("deleting a Job, which its Crew recreates", func(_ string, f *fixture) {
		var job batchv1.Job
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "alpha-1"}, &job); err != nil {
			t.Fatal(err)
		}
		uids[f.ns] = job.UID
		if err := k8s.Delete(ctx, &job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
	}, func(f *fixture, s crewState) bool {
		var job batchv1.Job
		err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "alpha-1"}, &job)
		return err == nil && job.UID != uids[f.ns] && jobsAre("alpha", "alpha-0", "alpha-1", "alpha-2")(s)
	})

	final := crewStateOf(t, inSidecar.ns, refusals["sidecar"])
	if gamma := final.Crews["gamma"].Spec; gamma.Size == nil || *gamma.Size != 1 || gamma.Image != "busybox:1.36" {
		t.Errorf("gamma's spec = %+v, want the webhook's defaults", gamma)
	}
	if want := `422 Invalid admission webhook "vcrew-v1.kb.io" denied the request: Crew.conformance.polyop.dev "too-big" is invalid: spec.size: Invalid value: 9: must be between 1 and 5; cause FieldValueInvalid spec.size: Invalid value: 9: must be between 1 and 5`; final.Refusals[0] != want {
		t.Errorf("the refusal of too-big = %q, want %q", final.Refusals[0], want)
	}
	if owner := final.Jobs["alpha-1"].Owners; len(owner) != 1 || owner[0].Kind != "Crew" || owner[0].Name != "alpha" || owner[0].Controller == nil || !*owner[0].Controller {
		t.Errorf("alpha-1's owners = %+v, want Crew alpha as controller", owner)
	}
}

// crewState is what the Crew operator leaves in a namespace, with what must
// differ between two runs left out or replaced: UIDs, resource versions,
// times, managed fields, and the namespace's name (as <namespace>).
type crewState struct {
	Crews    map[string]crewOf
	Jobs     map[string]jobOf
	Refusals []string
}

type crewOf struct {
	Labels map[string]string
	Spec   conformancev1.CrewSpec
	Status conformancev1.CrewStatus
}

type jobOf struct {
	Labels map[string]string
	Owners []metav1.OwnerReference
	Pod    corev1.PodSpec
}

// crewStateOf reads the Crews and Jobs in ns, with refusals, the errors
// the run's refused requests got.
func crewStateOf(t *testing.T, ns string, refusals []string) crewState {
	t.Helper()
	ctx := context.Background()
	s := crewState{Crews: map[string]crewOf{}, Jobs: map[string]jobOf{}, Refusals: refusals}
	var crews conformancev1.CrewList
	if err := k8s.List(ctx, &crews, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, c := range crews.Items {
		s.Crews[c.Name] = crewOf{Labels: c.Labels, Spec: c.Spec, Status: c.Status}
	}
	var jobs batchv1.JobList
	if err := k8s.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp != nil {
			continue
		}
		var owners []metav1.OwnerReference
		for _, o := range j.OwnerReferences {
			o.UID = ""
			owners = append(owners, o)
		}
		s.Jobs[j.Name] = jobOf{Labels: j.Labels, Owners: owners, Pod: j.Spec.Template.Spec}
	}
	return s
}

func (s crewState) String() string {
	data, _ := json.MarshalIndent(s, "", "  ")
	return string(data)
}

// refusal is the API server's answer to a refused request in ns: its code,
// reason, message and causes, with the namespace's name replaced.
func refusal(ns string, err error) string {
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return "accepted"
	case errors.As(err, &status):
		st := status.Status()
		text := fmt.Sprintf("%d %s %s", st.Code, st.Reason, err)
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				text += fmt.Sprintf("; cause %s %s: %s", c.Type, c.Field, c.Message)
			}
		}
		return strings.ReplaceAll(text, ns, "<namespace>")
	}
	return strings.ReplaceAll(err.Error(), ns, "<namespace>")
}

// installCrewWebhooks installs the webhook configurations controller-gen
// writes from the Crew webhooks' kubebuilder markers, each named after the
// fixture and admitting the fixture's namespace only (tests share the API
// server), pointing at a webhook server on the local host: the options say
// where it must serve, with which certificate.
func installCrewWebhooks(t *testing.T, f *fixture) *envtest.WebhookInstallOptions {
	t.Helper()
	return controlplane.InstallWebhookManifests(t, env.Config, k8s,
		filepath.Join(testenv.RepoRoot(), "test", "conformance", "indexsidecar", "config", "webhook", "manifests.yaml"), "crew-"+f.ns, f.ns)
}

// waitForWebhookServer waits until a manager (the host's or the operator's
// own) serves its webhooks.
func waitForWebhookServer(t *testing.T, p *testenv.Process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.WaitForOutput(ctx, "Serving webhook server"); err != nil {
		t.Fatal(err)
	}
}
