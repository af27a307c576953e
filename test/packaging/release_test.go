package packaging_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/scaffold"
)

// TestTheReleaseArtefacts checks this machine's release artefacts, which
// `make release` built for its own linux platform only (buildDist), as
// they are published, as a user and a registry receive them: the archive's
// polyop runs and knows the version, SHA256SUMS verifies, the SBOM names
// polyop's modules, the image tarball is an OCI layout of the host image
// config/ pins, whose host runs.
func TestTheReleaseArtefacts(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("the host image is a Linux image, and this machine runs %s", runtime.GOOS)
	}
	version, err := projectVersion()
	if err != nil {
		t.Fatal(err)
	}
	dir := buildDist(t).dir

	archive := fmt.Sprintf("polyop_%s_%s_%s.tar.gz", version, runtime.GOOS, runtime.GOARCH)
	sbom := fmt.Sprintf("polyop_%s_%s_%s.cdx.json", version, runtime.GOOS, runtime.GOARCH)
	image := "polyop-host-" + version + ".oci.tar"

	t.Run("the archive holds polyop, which knows its version", func(t *testing.T) {
		files := readTarGz(t, filepath.Join(dir, archive))
		want := []string{"polyop", "README.md"}
		if _, err := os.Stat(filepath.Join(root, "LICENSE")); err == nil {
			want = append(want, "LICENSE")
		}
		for _, name := range want {
			if _, ok := files[name]; !ok {
				t.Errorf("%s has no %s", archive, name)
			}
		}
		if len(files) != len(want) {
			t.Errorf("%s holds %d files, want %d (%v)", archive, len(files), len(want), want)
		}
		polyop, ok := files["polyop"]
		if !ok {
			return
		}
		if polyop.mode != 0o755 {
			t.Errorf("polyop in %s has mode %o, want 755", archive, polyop.mode)
		}
		exe := filepath.Join(outsideRepository(t), "polyop")
		if err := os.WriteFile(exe, polyop.data, os.FileMode(polyop.mode)); err != nil {
			t.Fatal(err)
		}
		out := mustRun(t, filepath.Dir(exe), exe, "version", "--output", "json")
		var v struct{ Version, HostImage string }
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("polyop version --output json printed %q: %v", out, err)
		}
		if v.Version != version {
			t.Errorf("the archive's polyop says it is version %q, the VERSION file %q", v.Version, version)
		}
		if want := scaffold.HostImage(version); v.HostImage != want {
			t.Errorf("the archive's polyop deploys the host image %q, want %q", v.HostImage, want)
		}
	})

	t.Run("SHA256SUMS covers every artefact and verifies", func(t *testing.T) {
		mustRun(t, dir, "sha256sum", "--check", "--strict", "SHA256SUMS")
		b, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for line := range strings.Lines(string(b)) {
			_, name, ok := strings.Cut(strings.TrimSpace(line), "  ")
			if !ok {
				t.Errorf("SHA256SUMS has a line not in sha256sum's format: %q", line)
				continue
			}
			listed = append(listed, name)
		}
		slices.Sort(listed)
		want := []string{image, archive, sbom}
		slices.Sort(want)
		if !slices.Equal(listed, want) {
			t.Errorf("SHA256SUMS lists %q, want %q", listed, want)
		}
	})

	t.Run("the SBOM is CycloneDX naming polyop's modules", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, sbom))
		if err != nil {
			t.Fatal(err)
		}
		type component struct{ Type, Name, Version, Purl string }
		var bom struct {
			BOMFormat   string `json:"bomFormat"`
			SpecVersion string `json:"specVersion"`
			Metadata    struct{ Component component }
			Components  []component
		}
		if err := json.Unmarshal(b, &bom); err != nil {
			t.Fatalf("%s is not JSON: %v", sbom, err)
		}
		if bom.BOMFormat != "CycloneDX" || !strings.HasPrefix(bom.SpecVersion, "1.") {
			t.Errorf("%s is a %q %q, want CycloneDX 1.x", sbom, bom.BOMFormat, bom.SpecVersion)
		}
		if c := bom.Metadata.Component; c.Name != "github.com/polyop/polyop" || c.Version != "v"+version || c.Type != "application" {
			t.Errorf("%s describes %+v, want the application github.com/polyop/polyop v%s", sbom, c, version)
		}
		// The modules polyop requires directly, at the versions its go.mod
		// requires.
		gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		// The binary is built as go install builds it, outside go.work: its
		// Go SDK is the module a release tags, at polyop's version.
		if i := slices.IndexFunc(bom.Components, func(c component) bool { return c.Name == "github.com/polyop/polyop/sdk/go" }); i < 0 {
			t.Errorf("%s does not name github.com/polyop/polyop/sdk/go", sbom)
		} else if c := bom.Components[i]; c.Version != "v"+version {
			t.Errorf("%s names github.com/polyop/polyop/sdk/go at version %q, want v%s (the release's, not a workspace's)", sbom, c.Version, version)
		}
		for _, module := range []string{"sigs.k8s.io/controller-runtime", "google.golang.org/grpc", "github.com/spf13/cobra", "k8s.io/client-go"} {
			m := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(module) + ` (v\S+)`).FindSubmatch(gomod)
			if m == nil {
				t.Errorf("go.mod does not require %s", module)
				continue
			}
			i := slices.IndexFunc(bom.Components, func(c component) bool { return c.Name == module })
			if i < 0 {
				t.Errorf("%s does not name %s", sbom, module)
				continue
			}
			c := bom.Components[i]
			if c.Version != string(m[1]) || !strings.HasPrefix(c.Purl, "pkg:golang/"+module+"@"+string(m[1])) {
				t.Errorf("%s names %s at version %q (%s), go.mod requires %s", sbom, module, c.Version, c.Purl, m[1])
			}
		}
	})

	t.Run("the image tarball is an OCI layout of the host image config pins", func(t *testing.T) {
		checkHostImage(t, filepath.Join(dir, image), version)
	})
}

// tarFile is a file of a tar stream.
type tarFile struct {
	mode int64
	data []byte
}

// readTarGz returns the regular files of a gzipped tar file by name.
func readTarGz(t *testing.T, path string) map[string]tarFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return readTar(t, zr)
}

func readTar(t *testing.T, r io.Reader) map[string]tarFile {
	t.Helper()
	files := map[string]tarFile{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = tarFile{h.Mode, b}
	}
}

// The parts of the OCI image layout, index, manifest and config the test
// reads (github.com/opencontainers/image-spec's, which polyop does not
// depend on).
type (
	ociDescriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations"`
		Platform    *struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	}
	ociIndex struct {
		MediaType   string            `json:"mediaType"`
		Manifests   []ociDescriptor   `json:"manifests"`
		Annotations map[string]string `json:"annotations"`
	}
	ociManifest struct {
		MediaType   string            `json:"mediaType"`
		Config      ociDescriptor     `json:"config"`
		Layers      []ociDescriptor   `json:"layers"`
		Annotations map[string]string `json:"annotations"`
	}
	ociConfig struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Config       struct {
			User       string
			Entrypoint []string
		} `json:"config"`
	}
)

// checkHostImage checks the OCI layout tarball at path: index.json names the
// image index as config/ pins the host image, every blob it reaches has the
// digest and size its descriptor says, the index holds this machine's
// platform, whose image runs /host as 65532:65532, and that host prints
// the version.
func checkHostImage(t *testing.T, path, version string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	files := readTar(t, f)
	f.Close()
	if layout := string(files["oci-layout"].data); !strings.Contains(layout, `"imageLayoutVersion": "1.0.0"`) {
		t.Errorf("the image tarball's oci-layout holds %q", layout)
	}
	blob := func(d ociDescriptor, v any) []byte {
		t.Helper()
		hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
		if !ok {
			t.Fatalf("descriptor %+v: not a sha256 digest", d)
		}
		b, ok := files["blobs/sha256/"+hexDigest]
		if !ok {
			t.Fatalf("the image tarball has no blob %s", d.Digest)
		}
		sum := sha256.Sum256(b.data)
		if hex.EncodeToString(sum[:]) != hexDigest || int64(len(b.data)) != d.Size {
			t.Fatalf("blob %s: %d bytes, digest sha256:%x; its descriptor says %d bytes", d.Digest, len(b.data), sum, d.Size)
		}
		if v != nil {
			if err := json.Unmarshal(b.data, v); err != nil {
				t.Fatalf("blob %s: %v", d.Digest, err)
			}
		}
		return b.data
	}

	var top ociIndex
	if err := json.Unmarshal(files["index.json"].data, &top); err != nil {
		t.Fatalf("the image tarball's index.json: %v", err)
	}
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json lists %d descriptors, want the image index only", len(top.Manifests))
	}
	if want := scaffold.HostImage(version); top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != want {
		t.Errorf("index.json names the image %q, want %q (the host image config/ pins)",
			top.Manifests[0].Annotations["org.opencontainers.image.ref.name"], want)
	}
	if top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("index.json's descriptor is a %s, want an OCI image index", top.Manifests[0].MediaType)
	}
	var index ociIndex
	blob(top.Manifests[0], &index)
	for key, want := range map[string]string{
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/polyop/polyop",
	} {
		if got := index.Annotations[key]; got != want {
			t.Errorf("the image index's annotation %s is %q, want %q", key, got, want)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(index.Annotations["org.opencontainers.image.revision"]) {
		t.Errorf("the image index's revision is %q, want a commit", index.Annotations["org.opencontainers.image.revision"])
	}
	i := slices.IndexFunc(index.Manifests, func(d ociDescriptor) bool {
		return d.Platform != nil && d.Platform.OS == runtime.GOOS && d.Platform.Architecture == runtime.GOARCH
	})
	if len(index.Manifests) != 1 || i < 0 {
		t.Fatalf("the image index lists %+v, want one image, for %s/%s", index.Manifests, runtime.GOOS, runtime.GOARCH)
	}
	var manifest ociManifest
	blob(index.Manifests[i], &manifest)
	var config ociConfig
	blob(manifest.Config, &config)
	if config.OS != runtime.GOOS || config.Architecture != runtime.GOARCH || config.Config.User != "65532:65532" ||
		!slices.Equal(config.Config.Entrypoint, []string{"/host"}) {
		t.Errorf("the image's config: %+v, want %s/%s running /host as 65532:65532", config, runtime.GOOS, runtime.GOARCH)
	}

	// The layers hold the host and the probe, both executable; the host
	// knows its version.
	found := map[string]tarFile{}
	for _, l := range manifest.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(blob(l, nil)))
		if err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		for name, f := range readTar(t, zr) {
			found[name] = f
		}
	}
	for _, name := range []string{"host", "probe", "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "etc/group"} {
		if _, ok := found[name]; !ok {
			t.Errorf("the image has no /%s", name)
		}
	}
	host, ok := found["host"]
	if !ok {
		return
	}
	exe := filepath.Join(t.TempDir(), "host")
	if err := os.WriteFile(exe, host.data, os.FileMode(host.mode)); err != nil {
		t.Fatal(err)
	}
	if out := strings.TrimSpace(mustRun(t, filepath.Dir(exe), exe, "--version")); out != version {
		t.Errorf("the image's /host --version printed %q, want %q", out, version)
	}
}
