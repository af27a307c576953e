package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// A Python sidecar watches the ConfigMaps of its namespace labelled
// watched=yes through the host's Watch stream, outside any reconcile, with
// the SDK's AsyncCluster.watch (test/e2e/testdata/python/watchprobe.py): it
// receives the ConfigMaps that were there when it started, then SYNCED, then
// each change of its selection as it happens — one added, changed, brought
// into the selection by a label, and deleted.
func TestAPythonSidecarWatchesAKindThroughTheHost(t *testing.T) {
	t.Parallel()
	py := python(t)
	f := newFixture(t)
	ctx := context.Background()
	configMap := func(name, v string, watched bool) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Data: map[string]string{"v": v}}
		if watched {
			cm.Labels = map[string]string{"watched": "yes"}
		}
		return cm
	}
	f.create(configMap("before", "1", true))
	f.create(configMap("outside", "1", false))

	sidecar := f.start("sidecar", py, filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "python", "watchprobe.py"),
		"--address", f.address(), "--namespace", f.ns)
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := sidecar.WaitForOutput(waitCtx, "Serving on "); err != nil {
		t.Fatal(err)
	}
	f.startHost()

	// Each line is waited for, then the lines' order is checked: each
	// change is made once the event of the one before it has arrived.
	var lines []string
	expect := func(line string) {
		t.Helper()
		lines = append(lines, line)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := sidecar.WaitForOutput(ctx, line+"\n"); err != nil {
			t.Fatalf("the sidecar did not print %q: %v\n%s", line, err, testenv.Tail(sidecar.Output(), 30))
		}
	}
	expect("watch: ADDED before 1")
	expect("watch: SYNCED")

	f.create(configMap("after", "1", true))
	expect("watch: ADDED after 1")

	var before corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "before"}, &before); err != nil {
		t.Fatal(err)
	}
	before.Data["v"] = "2"
	if err := k8s.Update(ctx, &before); err != nil {
		t.Fatal(err)
	}
	expect("watch: MODIFIED before 2")

	var outside corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "outside"}, &outside); err != nil {
		t.Fatal(err)
	}
	outside.Labels = map[string]string{"watched": "yes"}
	if err := k8s.Update(ctx, &outside); err != nil {
		t.Fatal(err)
	}
	expect("watch: ADDED outside 1")

	if err := k8s.Delete(ctx, configMap("after", "", true)); err != nil {
		t.Fatal(err)
	}
	expect("watch: DELETED after 1")

	var got []string
	for _, line := range strings.Split(sidecar.Output(), "\n") {
		if strings.HasPrefix(line, "watch") {
			got = append(got, line)
		}
	}
	if strings.Join(got, "\n") != strings.Join(lines, "\n") {
		t.Errorf("the sidecar printed the events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(lines, "\n"))
	}
}
