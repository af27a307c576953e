package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// This file holds the fixture's helpers for testsidecar children and its Widget
// kind (test/e2e/testdata/crd): owned children, watches, finalizers and the
// cluster service.

var widgetGVK = schema.GroupVersionKind{Group: "e2e.polyop.dev", Version: "v1", Kind: "Widget"}

// startChildSidecar starts testsidecar children on the fixture's socket, logging
// its calls to the fixture's call log.
func (f *fixture) startChildSidecar(args ...string) *testenv.Process {
	f.t.Helper()
	args = append([]string{"children", "--address", f.address(), "--log-file", f.callLog}, args...)
	return f.start("sidecar", testSidecarBin, args...)
}

// clusterAddress is where the host serves the cluster service by default:
// beside the sidecar's socket.
func (f *fixture) clusterAddress() string {
	return "unix://" + filepath.Join(filepath.Dir(f.socket), "cluster.sock")
}

// clusterClient dials the host's cluster service as a sidecar would.
func (f *fixture) clusterClient() polyopv1alpha1.ClusterServiceClient {
	f.t.Helper()
	target, err := sidecar.Target(f.clusterAddress())
	if err != nil {
		f.t.Fatal(err)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = conn.Close() })
	return polyopv1alpha1.NewClusterServiceClient(conn)
}

func (f *fixture) newWidget(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace(f.ns)
	u.SetName(name)
	return u
}

func (f *fixture) createWidget(name string, spec map[string]any) *unstructured.Unstructured {
	f.t.Helper()
	u := f.newWidget(name, spec)
	f.create(u)
	return u
}

// getWidget reads a Widget from the API server; nil when it does not exist.
func (f *fixture) getWidget(name string) *unstructured.Unstructured {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatalf("getting widget %s: %v", name, err)
	}
	return u
}

// updateWidget reads a Widget, applies change and writes it back, retrying
// conflicts.
func (f *fixture) updateWidget(name string, change func(*unstructured.Unstructured)) *unstructured.Unstructured {
	f.t.Helper()
	var u *unstructured.Unstructured
	err := retry.RetryOnConflict(conflictRetry, func() error {
		if u = f.getWidget(name); u == nil {
			f.t.Fatalf("updating widget %s: it does not exist", name)
		}
		change(u)
		return k8s.Update(context.Background(), u)
	})
	if err != nil {
		f.t.Fatalf("updating widget %s: %v", name, err)
	}
	return u
}

// setSpec replaces a Widget's spec.
func (f *fixture) setSpec(name string, spec map[string]any) *unstructured.Unstructured {
	f.t.Helper()
	return f.updateWidget(name, func(u *unstructured.Unstructured) { u.Object["spec"] = spec })
}

// widgetCall is one line of testsidecar children's call log.
type widgetCall struct {
	Time            time.Time `json:"time"`
	Method          string    `json:"method"`
	Namespace       string    `json:"namespace"`
	Name            string    `json:"name"`
	Exists          bool      `json:"exists"`
	Generation      int64     `json:"generation"`
	ResourceVersion string    `json:"resourceVersion"`
	Retries         int       `json:"retries"`
	Children        []string  `json:"children"`
	Finalizers      []string  `json:"finalizers"`
	Deleting        bool      `json:"deleting"`
}

// widgetCalls returns the calls of method ("Reconcile" or "Finalize") the
// sidecar logged for name.
func (f *fixture) widgetCalls(name, method string) []widgetCall {
	f.t.Helper()
	file, err := os.Open(f.callLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	var out []widgetCall
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var c widgetCall
		if json.Unmarshal(sc.Bytes(), &c) != nil {
			continue // being written
		}
		if c.Name == name && c.Namespace == f.ns && c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// waitReconciled waits until the sidecar has reconciled name at generation
// (or later) at least once more than it had when seen was counted, and returns
// that call.
func (f *fixture) waitReconciled(name string, generation int64, seen int) widgetCall {
	f.t.Helper()
	var last widgetCall
	testenv.Eventually(f.t, time.Minute, fmt.Sprintf("%s is reconciled at generation %d", name, generation), func() (bool, string) {
		calls := f.widgetCalls(name, "Reconcile")
		if len(calls) <= seen {
			return false, fmt.Sprintf("%d calls", len(calls))
		}
		last = calls[len(calls)-1]
		return last.Generation >= generation, fmt.Sprintf("last call %+v", last)
	})
	return last
}

// configMap reads a ConfigMap of the fixture's namespace; nil when it does not
// exist.
func (f *fixture) configMap(name string) *corev1.ConfigMap {
	f.t.Helper()
	cm := &corev1.ConfigMap{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatalf("getting ConfigMap %s: %v", name, err)
	}
	return cm
}

func (f *fixture) secret(name string) *corev1.Secret {
	f.t.Helper()
	s := &corev1.Secret{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatalf("getting Secret %s: %v", name, err)
	}
	return s
}

// statusString is a string field of a Widget's status.
func statusString(u *unstructured.Unstructured, field string) string {
	if u == nil {
		return ""
	}
	s, _, _ := unstructured.NestedString(u.Object, "status", field)
	return s
}

// statusList is a list of strings in a Widget's status, joined by commas.
func statusList(u *unstructured.Unstructured, field string) string {
	if u == nil {
		return ""
	}
	s, _, _ := unstructured.NestedStringSlice(u.Object, "status", field)
	return strings.Join(s, ",")
}

// requestCounts reads rest_client_requests_total from the host's metrics
// endpoint: the requests the host made to the API server, keyed by HTTP
// method and status code ("PATCH 200"; GET covers get, list and watch).
func requestCounts(t *testing.T, metricsAddr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("scraping the host's metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for line := range strings.SplitSeq(string(body), "\n") {
		labels, ok := strings.CutPrefix(line, "rest_client_requests_total{")
		if !ok {
			continue
		}
		end := strings.LastIndex(labels, "}")
		if end < 0 {
			continue
		}
		value, err := strconv.ParseFloat(strings.TrimSpace(labels[end+1:]), 64)
		if err != nil {
			continue
		}
		var method, code string
		for kv := range strings.SplitSeq(labels[:end], ",") {
			if m, ok := strings.CutPrefix(kv, `method="`); ok {
				method = strings.TrimSuffix(m, `"`)
			}
			if c, ok := strings.CutPrefix(kv, `code="`); ok {
				code = strings.TrimSuffix(c, `"`)
			}
		}
		counts[method+" "+code] += value
	}
	return counts
}

// byMethod sums counts over status codes.
func byMethod(counts map[string]float64, method string) float64 {
	total := 0.0
	for k, n := range counts {
		if strings.HasPrefix(k, method+" ") {
			total += n
		}
	}
	return total
}

// requestDiff is after minus before, by method, leaving out zeros.
func requestDiff(before, after map[string]float64) map[string]float64 {
	diff := map[string]float64{}
	for m, n := range after {
		if d := n - before[m]; d != 0 {
			diff[m] = d
		}
	}
	return diff
}

func formatCounts(c map[string]float64) string {
	if len(c) == 0 {
		return "none"
	}
	var methods []string
	for m := range c {
		methods = append(methods, m)
	}
	slices.Sort(methods)
	var parts []string
	for _, m := range methods {
		parts = append(parts, fmt.Sprintf("%s=%g", m, c[m]))
	}
	return strings.Join(parts, " ")
}
