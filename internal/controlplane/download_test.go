package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/tools/setup-envtest/remote"
	"sigs.k8s.io/yaml"

	"github.com/polyop/polyop/internal/testenv"
	"github.com/polyop/polyop/internal/testenv/envtestmirror"
)

// noGo is a go command that is on no PATH.
const noGo = "polyop-test-no-go"

// startMirror serves the envtest release of the tests' control plane
// (KUBEBUILDER_ASSETS) on loopback.
func startMirror(t *testing.T) *envtestmirror.Mirror {
	t.Helper()
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	m, err := envtestmirror.Start(assets, Version())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// unreachableIndex is the URL of an index on a loopback port that nothing
// listens on.
func unreachableIndex(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr + "/envtest-releases.yaml"
}

// cacheDir is a control-plane folder in a cache of the test's own.
func cacheDir(t *testing.T) string {
	return filepath.Join(t.TempDir(), "polyop", "k8s-"+Version())
}

// besideDir lists what is next to dir, but dir.
func besideDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != filepath.Base(dir) {
			names = append(names, e.Name())
		}
	}
	return names
}

// withPrefix returns the lines that start with prefix.
func withPrefix(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func TestInstallDownloadsTheEnvtestReleaseOnceAndThenReusesItWithoutTheNetwork(t *testing.T) {
	t.Parallel()
	m := startMirror(t)
	dir := cacheDir(t)
	var r recorder
	in := Installer{Dir: dir, IndexURL: m.IndexURL(), Go: noGo, Printf: r.printf, Interval: 20 * time.Millisecond}
	got, err := in.Install(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got != dir {
		t.Errorf("Install() = %q, want %q", got, dir)
	}

	// The binaries run, and are of the version asked for.
	for _, cmd := range [][]string{
		{"kube-apiserver", "--version"},
		{"etcd", "--version"},
		{"kubectl", "version", "--client"},
	} {
		out, err := exec.Command(filepath.Join(dir, cmd[0]), cmd[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd, " "), err, out)
		}
		if cmd[0] != "etcd" && !strings.Contains(string(out), "v"+Version()) {
			t.Errorf("%s printed %q, want v%s", strings.Join(cmd, " "), out, Version())
		}
	}

	lines := r.all()
	name := m.ArchiveName()
	for _, want := range []string{
		fmt.Sprintf("downloading %s (%s) from %s into %s", name, formatBytes(m.Size()), m.ArchiveURL(), dir),
		fmt.Sprintf("unpacked kube-apiserver, etcd, kubectl v%s into %s", Version(), dir),
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("printed %q, want the line %q", lines, want)
		}
	}
	if got := withPrefix(lines, "downloading "+name+": "); len(got) == 0 || !strings.Contains(got[0], " of "+formatBytes(m.Size())+" (") {
		t.Errorf("printed %q, want the bytes and percent downloaded every interval", lines)
	}
	if got := withPrefix(lines, "downloaded "+name+" ("+formatBytes(m.Size())+") in "); len(got) != 1 || !strings.HasSuffix(got[0], ", its SHA-512 checksum verified") {
		t.Errorf("printed %q, want one line that the download is verified", lines)
	}
	if n := m.ArchiveRequests(); n != 1 {
		t.Errorf("the archive was downloaded %d times, want once", n)
	}
	if left := besideDir(t, dir); !slices.Equal(left, []string{filepath.Base(dir) + ".lock"}) {
		t.Errorf("the download left %q next to %s, want its lock file only", left, dir)
	}

	// Without the mirror, and without Go, a second Install finds the folder
	// complete.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	printed := len(r.all())
	if again, err := in.Install(context.Background()); err != nil || again != dir {
		t.Errorf("the second Install() = %q, %v, want %q from the cache", again, err, dir)
	}
	if more := r.all()[printed:]; len(more) > 0 {
		t.Errorf("the second Install() printed %q, want nothing", more)
	}
}

func TestInstallsAtOnceDownloadOnceAndTheSecondWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	m := startMirror(t)
	dir := cacheDir(t)

	// The first holds the lock, and waits in its first line of the download
	// until the second says that it waits for the lock (or, were there no
	// lock, has returned).
	var first, second recorder
	firstDownloads := make(chan struct{})
	secondWaits, secondReturned := make(chan struct{}), make(chan struct{})
	var once sync.Once
	firstIn := Installer{Dir: dir, IndexURL: m.IndexURL(), Go: noGo, Interval: time.Hour, Printf: func(format string, args ...any) {
		first.printf(format, args...)
		if strings.HasPrefix(format, "downloading %s (%s) from") {
			once.Do(func() {
				close(firstDownloads)
				select {
				case <-secondWaits:
				case <-secondReturned:
					t.Error("the second Install() returned without waiting for the first's lock")
				}
			})
		}
	}}
	secondIn := Installer{Dir: dir, IndexURL: m.IndexURL(), Go: noGo, Interval: time.Hour, Printf: func(format string, args ...any) {
		second.printf(format, args...)
		if strings.HasPrefix(format, "waiting for another polyop") {
			close(secondWaits)
		}
	}}

	type result struct {
		dir string
		err error
	}
	firstDone, secondDone := make(chan result, 1), make(chan result, 1)
	go func() {
		d, err := firstIn.Install(context.Background())
		firstDone <- result{d, err}
	}()
	select {
	case <-firstDownloads:
	case res := <-firstDone:
		t.Fatalf("the first Install() = %q, %v before it downloaded", res.dir, res.err)
	}
	go func() {
		defer close(secondReturned)
		d, err := secondIn.Install(context.Background())
		secondDone <- result{d, err}
	}()
	for name, done := range map[string]chan result{"first": firstDone, "second": secondDone} {
		if res := <-done; res.err != nil || res.dir != dir {
			t.Errorf("the %s Install() = %q, %v, want %q", name, res.dir, res.err, dir)
		}
	}

	if n := m.ArchiveRequests(); n != 1 {
		t.Errorf("the archive was downloaded %d times, want once", n)
	}
	want := []string{
		fmt.Sprintf("waiting for another polyop, which is setting up the control plane in %s (it holds %s.lock)", dir, dir),
		fmt.Sprintf("the control plane in %s is set up", dir),
	}
	if got := second.all(); !slices.Equal(got, want) {
		t.Errorf("the second printed %q, want %q", got, want)
	}
	if missing := Missing(dir); len(missing) > 0 {
		t.Errorf("missing %q", missing)
	}
}

func TestInstallRefusesAnArchiveWhoseChecksumDiffersAndKeepsNothingOfIt(t *testing.T) {
	t.Parallel()
	m := startMirror(t)
	m.Corrupt()
	dir := cacheDir(t)
	_, err := Installer{Dir: dir, IndexURL: m.IndexURL(), Go: noGo}.Install(context.Background())
	if err == nil {
		t.Fatal("Install() = nil, want a checksum mismatch")
	}
	for _, want := range []string{
		"downloading " + m.ArchiveName() + ": checksum mismatch for " + m.ArchiveName() + ": ",
		" != " + m.Hash() + " (reported)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Install() = %v, want it to say %q", err, want)
		}
	}
	if got := Missing(dir); !slices.Equal(got, Binaries) {
		t.Errorf("after the refused download, %s holds what %q misses", dir, got)
	}
	if left := besideDir(t, dir); !slices.Equal(left, []string{filepath.Base(dir) + ".lock"}) {
		t.Errorf("the refused download left %q next to %s, want its lock file only", left, dir)
	}
	if n := m.ArchiveRequests(); n != 1 {
		t.Errorf("the archive was downloaded %d times, want once", n)
	}
}

func TestInstallWhenTheDownloadFails(t *testing.T) {
	t.Parallel()
	index := unreachableIndex(t)
	failed := "downloading the envtest binaries of Kubernetes " + Version() + " failed: reading the envtest release index: Get \"" + index + "\": "

	t.Run("if Go is installed, then it says why and builds from source", func(t *testing.T) {
		t.Parallel()
		dir := cacheDir(t)
		var r recorder
		got, err := Installer{Dir: dir, IndexURL: index, Go: fakeGo(t, false), Printf: r.printf, Interval: time.Hour}.Install(context.Background())
		if err != nil || got != dir {
			t.Fatalf("Install() = %q, %v, want %q", got, err, dir)
		}
		lines := r.all()
		if len(lines) < 2 || !strings.HasPrefix(lines[0], failed) || !strings.Contains(lines[0], "connection refused") ||
			!strings.HasSuffix(lines[0], "; building from source with go instead") ||
			!strings.HasPrefix(lines[1], "building kube-apiserver, etcd, kubectl v"+Version()+" from source into "+dir) {
			t.Errorf("printed %q, want why the download failed, then the build", lines)
		}
		if missing := Missing(dir); len(missing) > 0 {
			t.Errorf("missing %q after the build", missing)
		}
	})

	t.Run("if Go is installed but the build fails, then the error says both", func(t *testing.T) {
		t.Parallel()
		_, err := Installer{Dir: cacheDir(t), IndexURL: index, Go: fakeGo(t, true), Interval: time.Hour}.Install(context.Background())
		if err == nil || !strings.Contains(err.Error(), "etcd/main.go:1: no") ||
			!strings.Contains(err.Error(), "polyop built from source because downloading the envtest binaries failed: reading the envtest release index") {
			t.Errorf("Install() = %v, want the compile error and why the download failed", err)
		}
	})

	t.Run("if Go is not installed, then one error says every way to a control plane", func(t *testing.T) {
		t.Parallel()
		dir := cacheDir(t)
		var r recorder
		_, err := Installer{Dir: dir, IndexURL: index, Go: noGo, Printf: r.printf}.Install(context.Background())
		if err == nil {
			t.Fatal("Install() = nil, want an error")
		}
		want := "no local control plane (kube-apiserver, etcd, kubectl of Kubernetes " + Version() + "): " +
			"downloading them failed: reading the envtest release index: Get \"" + index + "\": "
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Install() = %v, want it to start with %q", err, want)
		}
		for _, want := range []string{
			"connection refused",
			"; and Go, which would build them from source instead, is not installed (exec: \"" + noGo + "\": executable file not found in $PATH). ",
			"To get one, let polyop reach the envtest release index " + index + ", or set POLYOP_ENVTEST_INDEX to a mirror of it; ",
			"or install Go, and polyop builds them, once, into " + dir + "; ",
			"or set KUBEBUILDER_ASSETS to a folder holding them",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Install() = %v, want it to say %q", err, want)
			}
		}
		if lines := r.all(); len(lines) > 0 {
			t.Errorf("printed %q, want nothing but the error", lines)
		}
	})
}

// serveIndex serves index at /envtest-releases.yaml, and handler at the
// other paths.
func serveIndex(t *testing.T, index func(url string) remote.Index, handler http.HandlerFunc) string {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/envtest-releases.yaml" {
			handler(w, r)
			return
		}
		data, err := yaml.Marshal(index(srv.URL))
		if err != nil {
			t.Error(err)
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/envtest-releases.yaml"
}

// indexOf is an index of one archive per version, of this machine's
// platform, whose selfLinks are <url>/archive.
func indexOf(vs ...string) func(url string) remote.Index {
	return func(url string) remote.Index {
		index := remote.Index{Releases: map[string]remote.Release{}}
		for _, v := range vs {
			c, err := concreteVersion(v)
			if err != nil {
				panic(err)
			}
			index.Releases["v"+v] = remote.Release{platform().ArchiveName(c): {Hash: "00", SelfLink: url + "/archive"}}
		}
		return index
	}
}

func TestDownloadFailsWithinSecondsWhenTheIndexCannotBeRead(t *testing.T) {
	t.Parallel()
	// A server that accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = silent.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	nothing := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(nothing.Close)
	notFound := nothing.URL + "/envtest-releases.yaml"
	htmlPage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "<html><body>a proxy's login page</body></html>")
	}))
	t.Cleanup(htmlPage.Close)
	plat := platform()

	cases := map[string]struct {
		index string
		want  []string
	}{
		"if nothing listens at the index's port": {
			index: unreachableIndex(t),
			want:  []string{"reading the envtest release index: Get ", "connection refused"},
		},
		"if the index's host has no address": {
			index: "http://polyop-envtest-index.invalid/envtest-releases.yaml",
			want:  []string{"reading the envtest release index: Get ", "lookup polyop-envtest-index.invalid"},
		},
		"if the index's server never answers": {
			index: "http://" + silent.Addr().String() + "/envtest-releases.yaml",
			want:  []string{"reading the envtest release index: Get ", "(no answer within 1s)"},
		},
		"if the index's server has no index there": {
			index: notFound,
			want:  []string{"reading the envtest release index " + notFound + ": 404 Not Found"},
		},
		"if the index is not an index": {
			index: htmlPage.URL,
			want:  []string{"the envtest release index " + htmlPage.URL + " is not an index of envtest releases (controller-tools' envtest-releases.yaml): "},
		},
		"if the index has other versions only": {
			index: serveIndex(t, indexOf("1.30.0", "1.36.1"), nil),
			want: []string{fmt.Sprintf("has no envtest-v%s-%s-%s.tar.gz (Kubernetes %s for %s); its releases for %s: 1.36.1, 1.30.0",
				Version(), plat.OS, plat.Arch, Version(), plat, plat)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := cacheDir(t)
			start := time.Now()
			err := Downloader{IndexURL: tc.index, ConnectTimeout: 5 * time.Second, IndexTimeout: time.Second}.Download(context.Background(), dir)
			took := time.Since(start)
			if err == nil {
				t.Fatal("Download() = nil, want an error")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Download() = %v, want it to say %q", err, want)
				}
			}
			// Seconds, not minutes, even on a busy machine.
			if took > 30*time.Second {
				t.Errorf("Download() failed after %s, want within seconds", took)
			}
			if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the failed download made %s (%v)", filepath.Dir(dir), err)
			}
		})
	}
}

func TestDownloadEndsWhenTheArchiveStopsComing(t *testing.T) {
	t.Parallel()
	index := serveIndex(t, indexOf(Version()), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	dir := cacheDir(t)
	var r recorder
	err := Downloader{IndexURL: index, StallTimeout: 500 * time.Millisecond, Interval: time.Hour, Printf: r.printf}.Download(context.Background(), dir)
	archive := strings.TrimSuffix(index, "/envtest-releases.yaml") + "/archive"
	if want := "received nothing for 500ms from " + archive; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Download() = %v, want it to say %q", err, want)
	}
	if lines := r.all(); len(lines) != 1 || !strings.Contains(lines[0], "(1.0 MB) from "+archive) {
		t.Errorf("printed %q, want the download's start with the archive's size", lines)
	}
	if missing := Missing(dir); !slices.Equal(missing, Binaries) {
		t.Errorf("the stalled download put %q into %s", slices.DeleteFunc(slices.Clone(Binaries), func(b string) bool { return slices.Contains(missing, b) }), dir)
	}
	if left := besideDir(t, dir); len(left) > 0 {
		t.Errorf("the stalled download left %q next to %s", left, dir)
	}
}

func TestDownloadProgressPrintsTheBytesAndThePercent(t *testing.T) {
	t.Parallel()
	var r recorder
	start := time.Now()
	p := &downloadProgress{name: "envtest-v1.37.2-linux-amd64.tar.gz", total: 200_000_000, printf: r.printf,
		start: start, now: func() time.Time { return start.Add(12 * time.Second) }, w: io.Discard}
	if _, err := p.Write(make([]byte, 50_000_000)); err != nil {
		t.Fatal(err)
	}
	p.report()
	p.total = -1
	p.report()
	p.done()
	want := []string{
		"downloading envtest-v1.37.2-linux-amd64.tar.gz: 50.0 MB of 200.0 MB (25%), 12s elapsed",
		"downloading envtest-v1.37.2-linux-amd64.tar.gz: 50.0 MB, 12s elapsed",
		"downloaded envtest-v1.37.2-linux-amd64.tar.gz (50.0 MB) in 12s, its SHA-512 checksum verified",
	}
	if got := r.all(); !slices.Equal(got, want) {
		t.Errorf("printed %q, want %q", got, want)
	}
	for n, want := range map[int64]string{-1: "size unknown", 999: "999 B", 1500: "1.5 kB", 131_400_000: "131.4 MB", 2_500_000_000: "2.50 GB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestIndexURLIsTheEnvironmentsElseControllerTools(t *testing.T) {
	t.Setenv(IndexEnv, "")
	if got := IndexURL(); got != remote.DefaultIndexURL || !strings.HasSuffix(got, "/controller-tools/HEAD/envtest-releases.yaml") {
		t.Errorf("IndexURL() = %q, want controller-tools' index %q", got, remote.DefaultIndexURL)
	}
	t.Setenv(IndexEnv, "http://mirror.example.com/envtest-releases.yaml")
	if got := IndexURL(); got != "http://mirror.example.com/envtest-releases.yaml" {
		t.Errorf("IndexURL() = %q, want $%s", got, IndexEnv)
	}
}

func TestLockWaitsForItsHolderAndGivesUpWithTheContext(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "k8s.lock")
	unlock, err := lock(context.Background(), path, func() { t.Error("the first lock waited") })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := false
	if _, err := lock(ctx, path, func() { waited = true; cancel() }); !errors.Is(err, context.Canceled) {
		t.Errorf("lock() while held = %v, want it to wait, then end with the context", err)
	}
	if !waited {
		t.Error("lock() while held did not say that it waits")
	}
	unlock()
	// The abandoned wait takes the lock and releases it at once.
	unlock, err = lock(context.Background(), path, func() {})
	if err != nil {
		t.Fatal(err)
	}
	unlock()
}
