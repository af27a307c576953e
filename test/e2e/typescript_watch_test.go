package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// A TypeScript sidecar watches the ConfigMaps of its namespace labelled
// watched=yes through the host's Watch stream, from before the host has
// greeted it (test/e2e/testdata/typescript/watchprobe.mjs): it gets the
// initial list, then every change, an object leaving the selection as
// deleted; and, across a restart of the host, during which one ConfigMap
// goes and another comes, it lists again and reports the one that went.
func TestATypeScriptSidecarWatchesTheHostsCache(t *testing.T) {
	t.Parallel()
	nodeBin := node(t)
	f := newFixture(t)
	ctx := context.Background()
	watched := map[string]string{"watched": "yes"}
	configMap := func(name string, labels map[string]string, v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: labels}, Data: map[string]string{"v": v}}
	}
	change := func(name string, fn func(*corev1.ConfigMap)) {
		t.Helper()
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &cm); err != nil {
			t.Fatal(err)
		}
		fn(&cm)
		if err := k8s.Update(ctx, &cm); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(name string) {
		t.Helper()
		if err := k8s.Delete(ctx, configMap(name, nil, "")); err != nil {
			t.Fatal(err)
		}
	}
	f.create(configMap("a", watched, "1"))
	f.create(configMap("b", watched, "1"))
	f.create(configMap("c", nil, "1"))

	sidecar := f.start("sidecar", nodeBin, filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "typescript", "watchprobe.mjs"), f.address(), f.ns)
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := sidecar.WaitForOutput(waitCtx, `"msg":"Serving"`); err != nil {
		t.Fatal(err)
	}
	host := f.startHost()

	// The initial list: a and b, in any order, then synced; c is not selected.
	synced := waitWatch(t, sidecar, 0, "synced")
	if got, want := slices.Sorted(slices.Values(watchLines(sidecar)[:synced])), []string{"added a 1", "added b 1"}; !slices.Equal(got, want) {
		t.Fatalf("the initial list was %q, want %q", got, want)
	}

	// The changes, in the order they were made.
	change("a", func(cm *corev1.ConfigMap) { cm.Data["v"] = "2" })
	at := waitWatch(t, sidecar, synced+1, "modified a 2")
	f.create(configMap("d", watched, "1"))
	at = waitWatch(t, sidecar, at+1, "added d 1")
	change("b", func(cm *corev1.ConfigMap) { delete(cm.Labels, "watched") })
	at = waitWatch(t, sidecar, at+1, "deleted b 1")
	remove("a")
	at = waitWatch(t, sidecar, at+1, "deleted a 2")

	// The host restarts; meanwhile d goes and e comes. The new host does not
	// remember the version the watch resumes from: the watch lists again,
	// reports e added and d, which it held, deleted, then synced again.
	host.Stop()
	remove("d")
	f.create(configMap("e", watched, "1"))
	f.startHost()
	again := waitWatch(t, sidecar, at+1, "synced")
	if got, want := watchLines(sidecar)[at+1:again], []string{"added e 1", "deleted d"}; !slices.Equal(got, want) {
		t.Errorf("after the host's restart the watch reported %q, want %q", got, want)
	}
	if lines := watchLines(sidecar); slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "error ") }) {
		t.Errorf("the watch failed: %q", lines)
	}
}

// watchLines are the events the watch probe printed, without "watch: ".
func watchLines(p *testenv.Process) []string {
	var out []string
	for line := range strings.SplitSeq(p.Output(), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "watch: "); ok {
			out = append(out, rest)
		}
	}
	return out
}

// waitWatch waits for the watch probe to print want at or after index from of
// its events, and returns its index.
func waitWatch(t *testing.T, p *testenv.Process, from int, want string) int {
	t.Helper()
	at := -1
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("the watch reports %q after event %d", want, from), func() (bool, string) {
		lines := watchLines(p)
		for i := from; i < len(lines); i++ {
			if lines[i] == want {
				at = i
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %q\n%s", lines, testenv.Tail(p.Output(), 10))
	})
	return at
}
