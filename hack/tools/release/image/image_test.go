package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// The platforms of the test image: this machine's, whose binaries the tests
// also run, and another.
var testPlatforms = []string{"linux/amd64", "linux/arm64"}

const (
	testRef      = "polyop-host:1.2.3"
	testVersion  = "1.2.3"
	testSource   = "https://github.com/polyop/polyop"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
	testCreated  = 1700000000
)

// tinyProgram prints the name it is stamped with, so that the host and the
// probe built from it differ and say which they are.
const tinyProgram = `package main

import "fmt"

var name = "unstamped"

func main() { fmt.Println(name) }
`

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// testBinaries builds, once, host-<os>-<arch> and probe-<os>-<arch> for each
// of testPlatforms, small static programs, and returns their folder.
func testBinaries(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "polyop-image-test-"); binErr != nil {
			return
		}
		src := filepath.Join(binDir, "src")
		if binErr = os.MkdirAll(src, 0o755); binErr != nil {
			return
		}
		for name, content := range map[string]string{"go.mod": "module tiny\n\ngo 1.26\n", "main.go": tinyProgram} {
			if binErr = os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); binErr != nil {
				return
			}
		}
		for _, p := range testPlatforms {
			goos, goarch, _ := strings.Cut(p, "/")
			for _, name := range []string{"host", "probe"} {
				out := filepath.Join(binDir, name+"-"+goos+"-"+goarch)
				cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.name="+name, "-o", out, ".")
				cmd.Dir = src
				cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOWORK=off", "GOFLAGS=")
				if b, err := cmd.CombinedOutput(); err != nil {
					binErr = fmt.Errorf("building the test %s for %s: %w\n%s", name, p, err, b)
					return
				}
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// buildArchive runs the command as make release-image does and returns the
// tar file it wrote.
func buildArchive(t *testing.T, dir string, created int64) string {
	t.Helper()
	out := filepath.Join(dir, "polyop-host-"+testVersion+".oci.tar")
	var stderr bytes.Buffer
	err := run([]string{"-bin", testBinaries(t), "-platforms", strings.Join(testPlatforms, " "), "-ref", testRef,
		"-version", testVersion, "-source", testSource, "-revision", testRevision,
		"-created", strconv.FormatInt(created, 10), "-o", out}, &stderr)
	if err != nil {
		t.Fatalf("image: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Wrote "+out) {
		t.Errorf("image reported %q, not the file it wrote", stderr.String())
	}
	return out
}

// untar extracts the tar file into a new folder, checking that every entry
// has the time created and is owned by root, and returns the folder.
func untar(t *testing.T, path string, created time.Time) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(created) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s in the tar file: time %s, owner %d:%d; want %s, 0:0", h.Name, h.ModTime, h.Uid, h.Gid, created)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(target, b, 0o644)
			}
		default:
			t.Errorf("%s in the tar file is of type %q", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// entry is a file of a layer.
type entry struct {
	header *tar.Header
	data   []byte
}

// layerFiles returns the entries of a layer in their order.
func layerFiles(t *testing.T, l v1.Layer) ([]string, map[string]entry) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	files := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		files[h.Name] = entry{h, b}
	}
	return names, files
}

func TestTheLayoutHoldsAnIndexOfOneImagePerPlatform(t *testing.T) {
	bins := testBinaries(t)
	created := time.Unix(testCreated, 0).UTC()
	dir := untar(t, buildArchive(t, t.TempDir(), testCreated), created)

	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("the tar file is not an OCI layout: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "oci-layout"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"imageLayoutVersion": "1.0.0"`) {
		t.Errorf("oci-layout holds %s", b)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 {
		t.Fatalf("index.json lists %d descriptors, want 1 (the image index)", len(topManifest.Manifests))
	}
	desc := topManifest.Manifests[0]
	if desc.MediaType != types.OCIImageIndex {
		t.Errorf("index.json's descriptor is a %s, want an OCI image index", desc.MediaType)
	}
	if got := desc.Annotations[AnnotationRefName]; got != testRef {
		t.Errorf("index.json names the image %q, want %q", got, testRef)
	}

	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Errorf("the image index does not validate: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	wantAnnotations := map[string]string{
		AnnotationVersion:  testVersion,
		AnnotationSource:   testSource,
		AnnotationRevision: testRevision,
		AnnotationCreated:  "2023-11-14T22:13:20Z",
	}
	if !reflect.DeepEqual(im.Annotations, wantAnnotations) {
		t.Errorf("the index's annotations are %v, want %v", im.Annotations, wantAnnotations)
	}
	if len(im.Manifests) != len(testPlatforms) {
		t.Fatalf("the index lists %d images, want %d", len(im.Manifests), len(testPlatforms))
	}

	var baseDigests []v1.Hash
	for i, want := range testPlatforms {
		d := im.Manifests[i]
		if d.Platform == nil || d.Platform.String() != want {
			t.Errorf("image %d of the index is for %v, want %s", i, d.Platform, want)
			continue
		}
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: a %s, want an OCI image manifest", want, d.MediaType)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.Config.MediaType != types.OCIConfigJSON {
			t.Errorf("%s: its config is a %s, want an OCI image config", want, m.Config.MediaType)
		}
		if !reflect.DeepEqual(m.Annotations, wantAnnotations) {
			t.Errorf("%s: its manifest's annotations are %v, want %v", want, m.Annotations, wantAnnotations)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		goos, goarch, _ := strings.Cut(want, "/")
		if cf.OS != goos || cf.Architecture != goarch {
			t.Errorf("%s: the config says %s/%s", want, cf.OS, cf.Architecture)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("%s: the user is %q, want 65532:65532", want, cf.Config.User)
		}
		if !reflect.DeepEqual(cf.Config.Entrypoint, []string{"/host"}) || len(cf.Config.Cmd) != 0 {
			t.Errorf("%s: the entrypoint is %q and the command %q, want [/host] and none", want, cf.Config.Entrypoint, cf.Config.Cmd)
		}
		if !cf.Created.Equal(created) {
			t.Errorf("%s: created %s, want %s", want, cf.Created.Time, created)
		}
		if !reflect.DeepEqual(cf.Config.Labels, wantAnnotations) {
			t.Errorf("%s: the labels are %v, want %v", want, cf.Config.Labels, wantAnnotations)
		}

		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if len(layers) != 3 || len(cf.History) != 3 {
			t.Fatalf("%s: %d layers and %d history entries, want 3 of each", want, len(layers), len(cf.History))
		}
		for j, l := range layers {
			if mt, err := l.MediaType(); err != nil || mt != types.OCILayer {
				t.Errorf("%s: layer %d is a %s (%v), want a gzipped OCI layer", want, j, mt, err)
			}
			if !cf.History[j].Created.Equal(created) {
				t.Errorf("%s: history entry %d created %s, want %s", want, j, cf.History[j].Created.Time, created)
			}
		}
		digest, err := layers[0].Digest()
		if err != nil {
			t.Fatal(err)
		}
		baseDigests = append(baseDigests, digest)

		// The base layer: the CA certificates, passwd, group and the
		// non-root user's home.
		names, files := layerFiles(t, layers[0])
		wantNames := []string{"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt", "home/", "home/nonroot/"}
		if !reflect.DeepEqual(names, wantNames) {
			t.Errorf("%s: the base layer holds %q, want %q", want, names, wantNames)
		}
		for name, mode := range map[string]int64{"etc/": 0o755, "etc/passwd": 0o644, "etc/group": 0o644,
			"etc/ssl/certs/ca-certificates.crt": 0o644, "home/nonroot/": 0o700} {
			if e, ok := files[name]; ok && e.header.Mode != mode {
				t.Errorf("%s: %s has mode %o, want %o", want, name, e.header.Mode, mode)
			}
		}
		if e := files["home/nonroot/"]; e.header != nil && (e.header.Uid != 65532 || e.header.Gid != 65532) {
			t.Errorf("%s: /home/nonroot is owned by %d:%d, want 65532:65532", want, e.header.Uid, e.header.Gid)
		}
		if e := files["etc/passwd"]; !strings.Contains(string(e.data), "nonroot:x:65532:65532:nonroot:/home/nonroot:") {
			t.Errorf("%s: /etc/passwd has no user 65532:\n%s", want, e.data)
		}
		if e := files["etc/group"]; !strings.Contains(string(e.data), "nonroot:x:65532:") {
			t.Errorf("%s: /etc/group has no group 65532:\n%s", want, e.data)
		}
		checkCACertificates(t, files["etc/ssl/certs/ca-certificates.crt"].data)

		// The probe's layer, then the host's: each its binary, executable,
		// owned by root.
		for j, name := range []string{"probe", "host"} {
			names, files := layerFiles(t, layers[j+1])
			if !reflect.DeepEqual(names, []string{name}) {
				t.Errorf("%s: layer %d holds %q, want [%s]", want, j+1, names, name)
				continue
			}
			e := files[name]
			if e.header.Mode != 0o755 || e.header.Uid != 0 || e.header.Gid != 0 || e.header.Typeflag != tar.TypeReg {
				t.Errorf("%s: /%s has mode %o, owner %d:%d, type %q; want 755, 0:0, a file", want, name, e.header.Mode, e.header.Uid, e.header.Gid, e.header.Typeflag)
			}
			built, err := os.ReadFile(filepath.Join(bins, name+"-"+goos+"-"+goarch))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(e.data, built) {
				t.Errorf("%s: /%s is not the %s built for the platform", want, name, name)
			}
			// This machine's binaries run, as a container would run them.
			if goos == runtime.GOOS && goarch == runtime.GOARCH {
				exe := filepath.Join(t.TempDir(), name)
				if err := os.WriteFile(exe, e.data, os.FileMode(e.header.Mode)); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(exe).Output()
				if err != nil || strings.TrimSpace(string(out)) != name {
					t.Errorf("%s: /%s printed %q (%v), want %q", want, name, out, err, name)
				}
			}
		}
	}
	if len(baseDigests) == 2 && baseDigests[0] != baseDigests[1] {
		t.Errorf("the base layers of the platforms differ (%s, %s): they hold the same files", baseDigests[0], baseDigests[1])
	}
}

// checkCACertificates fails unless pemData is a bundle of many CA
// certificates, nothing else.
func checkCACertificates(t *testing.T, pemData []byte) {
	t.Helper()
	n := 0
	for rest := pemData; len(bytes.TrimSpace(rest)) > 0; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			t.Fatalf("the CA bundle holds something that is not PEM after %d certificates", n)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("certificate %d of the CA bundle: %v", n, err)
		}
		if !cert.IsCA {
			t.Errorf("certificate %d of the CA bundle (%s) is not a CA", n, cert.Subject)
		}
		n++
	}
	// Mozilla's store holds some 120 roots (116 unconstrained in
	// x509roots/fallback at the pinned version).
	if n < 100 {
		t.Errorf("the CA bundle holds %d certificates, want Mozilla's store of some 120", n)
	}
}

func TestTheImageIsReproducible(t *testing.T) {
	first := buildArchive(t, t.TempDir(), testCreated)
	second := buildArchive(t, t.TempDir(), testCreated)
	a, b := fileDigest(t, first), fileDigest(t, second)
	if a != b {
		t.Fatalf("two builds of the same binaries differ: %s and %s", a, b)
	}

	// Another time is another image: the time is in the image, not only in
	// the tar file.
	later := buildArchive(t, t.TempDir(), testCreated+1)
	if indexDigest(t, later, time.Unix(testCreated+1, 0).UTC()) == indexDigest(t, first, time.Unix(testCreated, 0).UTC()) {
		t.Error("a build with another creation time has the same image index digest")
	}
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// indexDigest is the digest of the image index index.json names.
func indexDigest(t *testing.T, path string, created time.Time) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(untar(t, path, created), "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json lists %d descriptors", len(index.Manifests))
	}
	return index.Manifests[0].Digest.String()
}

func TestTheIndexPushesToARegistryWithItsDigest(t *testing.T) {
	created := time.Unix(testCreated, 0).UTC()
	p, err := layout.FromPath(untar(t, buildArchive(t, t.TempDir(), testCreated), created))
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want := m.Manifests[0].Digest
	idx, err := top.ImageIndex(want)
	if err != nil {
		t.Fatal(err)
	}

	// go-containerregistry's registry, as crane push writes to any.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://")+"/"+testRef, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatalf("pushing the index: %v", err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest != want || desc.MediaType != types.OCIImageIndex {
		t.Errorf("the registry serves %s as %s (%s), want the layout's index %s", ref, desc.Digest, desc.MediaType, want)
	}
	// A client on each platform pulls its own image.
	for _, pl := range testPlatforms {
		goos, goarch, _ := strings.Cut(pl, "/")
		img, err := remote.Image(ref, remote.WithPlatform(v1.Platform{OS: goos, Architecture: goarch}))
		if err != nil {
			t.Fatalf("pulling %s for %s: %v", ref, pl, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != goos || cf.Architecture != goarch {
			t.Errorf("a client on %s pulled the image for %s/%s", pl, cf.OS, cf.Architecture)
		}
	}
}

func TestTheCommandRefusesWhatWouldNotRun(t *testing.T) {
	bins := testBinaries(t)
	out := filepath.Join(t.TempDir(), "image.oci.tar")
	args := func(extra ...string) []string {
		a := []string{"-bin", bins, "-ref", testRef, "-version", testVersion, "-created", "1", "-o", out}
		return append(a, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no platform", args("-platforms", " "), "-platforms names no platform"},
		{"not os/arch", args("-platforms", "linux"), `-platforms: "linux" is not os/arch`},
		{"not linux", args("-platforms", "darwin/arm64"), "darwin/arm64 is not a linux platform"},
		{"twice", args("-platforms", "linux/amd64,linux/amd64"), "platform linux/amd64 is named twice"},
		{"no binaries", args("-platforms", "linux/riscv64"), "probe-linux-riscv64: no such file"},
		{"no time", []string{"-bin", bins, "-ref", testRef, "-version", testVersion, "-platforms", "linux/amd64", "-o", out}, "-created is required"},
		{"bad time", args("-platforms", "linux/amd64", "-created", "yesterday"), `-created "yesterday": not a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}

	// A binary of another architecture under a platform's name.
	mixed := t.TempDir()
	for _, name := range []string{"host", "probe"} {
		b, err := os.ReadFile(filepath.Join(bins, name+"-linux-arm64"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mixed, name+"-linux-amd64"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	err := run([]string{"-bin", mixed, "-platforms", "linux/amd64", "-ref", testRef, "-version", testVersion, "-created", "1", "-o", out}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "is built for EM_AARCH64, not for amd64") {
		t.Errorf("an arm64 binary as amd64's: got %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed build left %s (%v)", out, err)
	}

	// A binary that needs the C library's dynamic loader, as one built with
	// cgo does: the system's own true.
	if runtime.GOOS != "linux" {
		return
	}
	dynamic, err := exec.LookPath("true")
	if err != nil {
		t.Fatalf("no true on PATH: %v", err)
	}
	b, err := os.ReadFile(dynamic)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"host", "probe"} {
		if err := os.WriteFile(filepath.Join(mixed, name+"-linux-"+runtime.GOARCH), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	err = run([]string{"-bin", mixed, "-platforms", "linux/" + runtime.GOARCH, "-ref", testRef, "-version", testVersion, "-created", "1", "-o", out}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "is linked dynamically (build it with CGO_ENABLED=0)") {
		t.Errorf("%s, a dynamically linked binary: got %v", dynamic, err)
	}
}
