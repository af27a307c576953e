package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/testenv"
)

// TestExampleAdmission drives the example sidecar's webhooks (defaulting and
// validation of MaintenanceWindow, served by the host over gRPC) through
// kubectl, as a user would.
func TestExampleAdmission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.start("sidecar", exampleSidecarBin, "--address", f.address())
	f.startHostWithWebhooks(f.installWebhooks())

	t.Run("an invalid object is refused with the message and the field path", func(t *testing.T) {
		out, err := kubectlIn(t, f.windowYAML("too-long", "2026-01-01T00:00:00Z", "48h", "", nil), "apply", "-f", "-")
		if err == nil {
			t.Fatalf("kubectl apply accepted a 48h window:\n%s", out)
		}
		// kubectl prints a 422 with causes as it prints the API server's own
		// validation errors.
		want := `The MaintenanceWindow "too-long" is invalid: spec.duration: Invalid value: "48h": must be between 1m and 24h`
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply printed:\n%s\nwant it to contain:\n%s", out, want)
		}
		if f.exists("too-long") {
			t.Error("the refused window exists")
		}
	})

	t.Run("every field error is reported", func(t *testing.T) {
		out, err := kubectlIn(t, f.windowYAML("all-wrong", "yesterday", "0s", "soon", nil), "create", "-f", "-")
		if err == nil {
			t.Fatalf("kubectl create accepted an invalid window:\n%s", out)
		}
		for _, want := range []string{
			`spec.start: Invalid value: "yesterday": must be an RFC 3339 time`,
			`spec.duration: Invalid value: "0s": must be between 1m and 24h`,
			`spec.every: Invalid value: "soon": must be a duration`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl create printed:\n%s\nwant it to contain %q", out, want)
			}
		}
	})

	t.Run("warnings are printed", func(t *testing.T) {
		manifest := f.windowYAML("paused", "2026-01-01T00:00:00Z", "1h", "", nil)
		manifest = strings.Replace(manifest, "spec:\n", "spec:\n  paused: true\n", 1)
		out, err := kubectlIn(t, manifest, "create", "-f", "-")
		if err != nil {
			t.Fatalf("kubectl create: %v\n%s", err, out)
		}
		if want := "Warning: spec.paused is set: no window opens until it is unset"; !strings.Contains(out, want) {
			t.Errorf("kubectl create printed:\n%s\nwant the warning %q", out, want)
		}
	})

	t.Run("defaults appear on the created object", func(t *testing.T) {
		out, err := kubectlIn(t, f.windowYAML("defaulted", "2026-01-01T00:00:00Z", "", "24h", nil), "create", "-f", "-")
		if err != nil {
			t.Fatalf("kubectl create: %v\n%s", err, out)
		}
		out, err = kubectl(t, "get", "maintenancewindows.v1.examples.polyop.dev", "defaulted", "-n", f.ns,
			"-o", `jsonpath={.spec.duration} {.metadata.labels.examples\.polyop\.dev/team}`)
		if err != nil {
			t.Fatalf("kubectl get: %v\n%s", err, out)
		}
		if out != "1h unassigned" {
			t.Errorf("duration and team = %q, want %q", out, "1h unassigned")
		}
	})

	t.Run("an immutable field cannot change", func(t *testing.T) {
		if out, err := kubectlIn(t, f.windowYAML("anchored", "2026-01-01T00:00:00Z", "1h", "", nil), "create", "-f", "-"); err != nil {
			t.Fatalf("kubectl create: %v\n%s", err, out)
		}
		out, err := kubectl(t, "patch", "maintenancewindows.v1.examples.polyop.dev", "anchored", "-n", f.ns,
			"--type", "merge", "-p", `{"spec":{"start":"2026-02-01T00:00:00Z"}}`)
		if err == nil {
			t.Fatalf("kubectl patch changed spec.start:\n%s", out)
		}
		if want := `spec.start: Invalid value: "2026-02-01T00:00:00Z": field is immutable`; !strings.Contains(out, want) {
			t.Errorf("kubectl patch printed:\n%s\nwant it to contain %q", out, want)
		}
		// Other fields may change.
		if out, err := kubectl(t, "patch", "maintenancewindows.v1.examples.polyop.dev", "anchored", "-n", f.ns,
			"--type", "merge", "-p", `{"spec":{"duration":"2h"}}`); err != nil {
			t.Errorf("kubectl patch of spec.duration: %v\n%s", err, out)
		}
	})

	t.Run("a protected window cannot be deleted until the annotation goes", func(t *testing.T) {
		protected := map[string]string{"examples.polyop.dev/protected": "true"}
		if out, err := kubectlIn(t, f.windowYAML("guarded", "2026-01-01T00:00:00Z", "1h", "", protected), "create", "-f", "-"); err != nil {
			t.Fatalf("kubectl create: %v\n%s", err, out)
		}
		out, err := kubectl(t, "delete", "maintenancewindow", "guarded", "-n", f.ns, "--wait=false")
		if err == nil {
			t.Fatalf("kubectl delete deleted a protected window:\n%s", out)
		}
		if !contains(out, "Forbidden", "is protected: remove the annotation examples.polyop.dev/protected to delete it") {
			t.Errorf("kubectl delete printed:\n%s", out)
		}
		if out, err := kubectl(t, "annotate", "maintenancewindow", "guarded", "-n", f.ns, "examples.polyop.dev/protected-"); err != nil {
			t.Fatalf("kubectl annotate: %v\n%s", err, out)
		}
		if out, err := kubectl(t, "delete", "maintenancewindow", "guarded", "-n", f.ns, "--wait=false"); err != nil {
			t.Errorf("kubectl delete after removing the annotation: %v\n%s", err, out)
		}
	})
}

// TestAdmissionDryRunReachesTheSidecarAndWritesNothing checks that a
// server-side dry run is admitted by the sidecar, which is told it is a dry
// run, and that nothing is stored.
func TestAdmissionDryRunReachesTheSidecarAndWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar("--webhooks", "--admission-log-file", f.admissionLog())
	f.startHostWithWebhooks(f.installWebhooks())

	out, err := kubectlIn(t, f.windowYAML("dry", "2026-01-01T00:00:00Z", "1h", "", nil), "create", "--dry-run=server", "-o", "json", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl create --dry-run=server: %v\n%s", err, out)
	}
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("kubectl printed no object: %v\n%s", err, out)
	}
	if obj.Metadata.Labels["e2e.polyop.dev/defaulted"] != "true" {
		t.Errorf("the dry run's answer is not defaulted: labels %v", obj.Metadata.Labels)
	}
	calls := f.admissionCalls("dry")
	var webhooks []string
	for _, c := range calls {
		webhooks = append(webhooks, c.Webhook)
		if !c.DryRun || c.Operation != "CREATE" {
			t.Errorf("the sidecar got %+v, want a CREATE with dryRun set", c)
		}
	}
	if strings.Join(webhooks, ",") != "default,validate" {
		t.Errorf("the sidecar was called for %v, want default then validate", webhooks)
	}
	if f.exists("dry") {
		t.Error("the dry run stored the object")
	}
}

// TestAdmissionDeniesClearlyWhileTheSidecarIsDown stops the sidecar: requests
// are denied within the deadline with a message naming the sidecar, and are
// admitted again once it is back.
func TestAdmissionDeniesClearlyWhileTheSidecarIsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sc := f.startTestSidecar("--webhooks", "--admission-log-file", f.admissionLog())
	f.startHostWithWebhooks(f.installWebhooks())

	if out, err := kubectlIn(t, f.windowYAML("before", "2026-01-01T00:00:00Z", "1h", "", nil), "create", "-f", "-"); err != nil {
		t.Fatalf("kubectl create while the sidecar runs: %v\n%s", err, out)
	}
	sc.Stop()

	out, err := kubectlIn(t, f.windowYAML("during", "2026-01-01T00:00:00Z", "1h", "", nil), "create", "-f", "-")
	if err == nil {
		t.Fatalf("kubectl create succeeded with the sidecar down:\n%s", out)
	}
	// Had the webhook's timeout passed first, the API server would have
	// refused the request with its own message, not the host's: the message
	// is the proof that the host answered in time. (kubectl's wall time is
	// not: its start-up alone takes seconds on a loaded machine.)
	if !contains(out, `sidecar "testsidecar" could not default MaintenanceWindow `+f.ns+`/during`, "unreachable") || strings.Contains(out, "deadline exceeded") {
		t.Errorf("kubectl create printed:\n%s\nwant a denial naming the sidecar and saying it is unreachable", out)
	}

	f.startTestSidecar("--webhooks", "--admission-log-file", f.admissionLog())
	testenv.Eventually(f.t, time.Minute, "admission works again once the sidecar is back", func() (bool, string) {
		out, err := kubectlIn(t, f.windowYAML("after", "2026-01-01T00:00:00Z", "1h", "", nil), "create", "-f", "-")
		return err == nil, out
	})
}

// TestAdmissionIgnorePolicyAllowsWhileTheSidecarIsDown checks that a webhook
// declared with failurePolicy Ignore lets requests through, with a warning,
// when the sidecar cannot answer.
func TestAdmissionIgnorePolicyAllowsWhileTheSidecarIsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sc := f.startTestSidecar("--webhooks", "--webhook-failure-policy", "ignore")
	f.startHostWithWebhooks(f.installWebhooks())
	sc.Stop()

	out, err := kubectlIn(t, f.windowYAML("ignored", "2026-01-01T00:00:00Z", "1h", "", nil), "create", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl create was refused with the sidecar down and failurePolicy Ignore: %v\n%s", err, out)
	}
	if !contains(out, "Warning:", `sidecar "testsidecar"`, "unreachable", "failure policy is Ignore") {
		t.Errorf("kubectl create printed:\n%s\nwant a warning naming the sidecar and the failure policy", out)
	}
	if !f.exists("ignored") {
		t.Error("the window was not created")
	}
}

// TestAdmissionDeniesASlowSidecarWithinTheDeadline checks that a sidecar that
// does not answer in time is reported by the host, before the API server's
// own timeout.
func TestAdmissionDeniesASlowSidecarWithinTheDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// The API server's timeout leaves the host 9s past its own deadline to
	// answer, which a busy machine may need.
	f.startTestSidecar("--webhooks", "--webhook-timeout-seconds", "10")
	f.startHostWithWebhooks(f.installWebhooks(), "--admission-timeout", "1s")

	// Had the API server's own timeout of 10s passed first, it would have
	// refused the request with its own message, not the host's: the message
	// is the proof that the host answered in time. (kubectl's wall time is
	// not: its start-up alone takes seconds on a loaded machine.)
	slow := map[string]string{"e2e.polyop.dev/admission-delay": "20s"}
	out, err := kubectlIn(t, f.windowYAML("slow", "2026-01-01T00:00:00Z", "1h", "", slow), "create", "-f", "-")
	if err == nil {
		t.Fatalf("kubectl create succeeded with a sidecar that takes 20s:\n%s", out)
	}
	if !contains(out, `sidecar "testsidecar" could not default`, "did not answer within 1") {
		t.Errorf("kubectl create printed:\n%s\nwant a denial naming the sidecar and the deadline", out)
	}
}

// TestAdmissionRefusesABrokenDefaultAnswer checks that the host refuses a
// defaulted object that is not JSON, or is another object than the one
// admitted.
func TestAdmissionRefusesABrokenDefaultAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar("--webhooks")
	f.startHostWithWebhooks(f.installWebhooks())

	for answer, want := range map[string]string{
		"not-json":    "answered with a defaulted object that is not valid JSON",
		"rename":      `answered with a defaulted object that is another object: it changes metadata.name from "broken-rename" to "broken-rename-renamed"`,
		"rekind":      `answered with a defaulted object that is another object: it changes kind from "MaintenanceWindow" to "SomethingElse"`,
		"renamespace": `answered with a defaulted object that is another object: it changes metadata.namespace from "` + f.ns + `" to "elsewhere"`,
	} {
		t.Run(answer, func(t *testing.T) {
			name := "broken-" + answer
			annotations := map[string]string{"e2e.polyop.dev/default-answer": answer}
			out, err := kubectlIn(t, f.windowYAML(name, "2026-01-01T00:00:00Z", "1h", "", annotations), "create", "-f", "-")
			if err == nil {
				t.Fatalf("kubectl create accepted the broken answer:\n%s", out)
			}
			if !contains(out, `sidecar "testsidecar" could not default MaintenanceWindow `+f.ns+"/"+name, want) {
				t.Errorf("kubectl create printed:\n%s\nwant it to contain %q", out, want)
			}
			if f.exists(name) {
				t.Error("the object exists")
			}
		})
	}
}

// TestAdmissionFieldErrorsAndWarningsFromTheTestSidecar checks a denial with
// a message only (403), one with field errors (422), with warnings, and one
// with an API status error of its own (409 Conflict).
func TestAdmissionFieldErrorsAndWarningsFromTheTestSidecar(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar("--webhooks")
	f.startHostWithWebhooks(f.installWebhooks())

	out, err := kubectlIn(t, f.windowYAML("denied", "2026-01-01T00:00:00Z", "1h", "", map[string]string{
		"e2e.polyop.dev/deny": "not on a Friday",
		"e2e.polyop.dev/warn": "careful",
	}), "create", "-f", "-")
	if err == nil {
		t.Fatalf("kubectl create was not denied:\n%s", out)
	}
	if !contains(out, "Warning: careful", "Error from server (Forbidden)", "denied the request: not on a Friday") {
		t.Errorf("kubectl create printed:\n%s", out)
	}

	out, err = kubectlIn(t, f.windowYAML("invalid", "2026-01-01T00:00:00Z", "1h", "24h", map[string]string{
		"e2e.polyop.dev/invalid": "spec.every",
	}), "create", "-f", "-")
	if err == nil {
		t.Fatalf("kubectl create was not denied:\n%s", out)
	}
	if want := `The MaintenanceWindow "invalid" is invalid: spec.every: Invalid value: "24h": rejected by testsidecar`; !strings.Contains(out, want) {
		t.Errorf("kubectl create printed:\n%s\nwant %q", out, want)
	}

	out, err = kubectlIn(t, f.windowYAML("conflicting", "2026-01-01T00:00:00Z", "1h", "", map[string]string{
		"e2e.polyop.dev/conflict": "the slot is taken by another window",
	}), "create", "-f", "-")
	if err == nil {
		t.Fatalf("kubectl create was not denied:\n%s", out)
	}
	if !contains(out, "Error from server (Conflict)", "the slot is taken by another window") {
		t.Errorf("kubectl create printed:\n%s\nwant a 409 Conflict with the validator's message", out)
	}
}

// TestAdmissionIsServedByEveryReplica runs two replicas of the host with
// leader election: the webhook configurations point at the one that is not
// the leader, and admission works through it.
func TestAdmissionIsServedByEveryReplica(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar("--webhooks", "--admission-log-file", f.admissionLog())
	election := []string{"--leader-elect", "--leader-election-namespace", f.ns, "--leader-election-id", "e2e-" + f.ns}

	leader := f.startHost(append([]string{"--webhook-port", strings.TrimPrefix(freePort(t), "127.0.0.1:"), "--webhook-host", "127.0.0.1"}, election...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := leader.WaitForOutput(ctx, "Successfully acquired lease"); err != nil {
		t.Fatal(err)
	}
	// The leader serves the Cluster service beside the sidecar's socket.
	follower := f.startHostWithWebhooks(f.installWebhooks(), append(election, "--cluster-address", "0")...)

	out, err := kubectlIn(t, f.windowYAML("replica", "2026-01-01T00:00:00Z", "1h", "", nil), "create", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl create through the replica that is not the leader: %v\n%s", err, out)
	}
	if len(f.admissionCalls("replica")) != 2 {
		t.Errorf("the sidecar got %v, want a Default and a Validate", f.admissionCalls("replica"))
	}
	if strings.Contains(follower.Output(), "Successfully acquired lease") {
		t.Error("the replica that admitted the request is the leader: the test proves nothing")
	}
}

// TestWebhookServerSpeaksHTTP2OnlyWhenAsked checks the webhook server's ALPN:
// HTTP/1.1 alone by default (the HTTP/2 Rapid Reset CVEs), HTTP/2 with
// --webhook-enable-http2.
func TestWebhookServerSpeaksHTTP2OnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "http/1.1"},
		{[]string{"--webhook-enable-http2"}, "h2"},
	} {
		f := newFixture(t)
		f.startTestSidecar("--webhooks")
		webhookArgs := f.installWebhooks()
		f.startHostWithWebhooks(webhookArgs, tc.args...)
		port := webhookArgs[3]
		conn, err := tls.Dial("tcp", "127.0.0.1:"+port, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // Only the protocol is checked.
		if err != nil {
			t.Fatal(err)
		}
		if got := conn.ConnectionState().NegotiatedProtocol; got != tc.want {
			t.Errorf("with %v the webhook server speaks %q, want %q", tc.args, got, tc.want)
		}
		_ = conn.Close()
	}
}
