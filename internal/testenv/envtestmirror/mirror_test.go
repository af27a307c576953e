package envtestmirror

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/tools/setup-envtest/remote"
	"sigs.k8s.io/controller-runtime/tools/setup-envtest/versions"
)

// assets writes a folder of small stand-ins for the binaries, each holding
// its own name.
func assets(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range Binaries {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\necho "+name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestTheMirrorServesAnIndexAndAnArchiveAsControllerToolsPublishesThem(t *testing.T) {
	t.Parallel()
	m, err := Start(assets(t), "1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close() }()
	plat := versions.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
	if want := "envtest-v1.37.2-" + plat.OS + "-" + plat.Arch + ".tar.gz"; m.ArchiveName() != want {
		t.Errorf("ArchiveName() = %q, want %q", m.ArchiveName(), want)
	}

	// setup-envtest's client lists the version, for this platform, with the
	// hash of the archive.
	client := &remote.HTTPClient{IndexURL: m.IndexURL()}
	sets, err := client.ListVersions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v := versions.Concrete{Major: 1, Minor: 37, Patch: 2}
	if len(sets) != 1 || sets[0].Version != v || len(sets[0].Platforms) != 1 ||
		sets[0].Platforms[0].Platform != plat || sets[0].Platforms[0].Value != m.Hash() {
		t.Errorf("ListVersions() = %+v, want 1.37.2 for %s with hash %s", sets, plat, m.Hash())
	}

	archive := get(t, m.ArchiveURL())
	if int64(len(archive)) != m.Size() {
		t.Errorf("the archive has %d bytes, Size() = %d", len(archive), m.Size())
	}
	sum := sha512.Sum512(archive)
	if got := hex.EncodeToString(sum[:]); got != m.Hash() {
		t.Errorf("the archive's SHA-512 is %s, Hash() = %s", got, m.Hash())
	}
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Typeflag == tar.TypeReg {
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if want := "echo " + filepath.Base(h.Name) + "\n"; !strings.HasSuffix(string(body), want) || h.Mode&0o111 == 0 {
				t.Errorf("%s holds %q (mode %o), want an executable ending in %q", h.Name, body, h.Mode, want)
			}
		}
	}
	want := []string{"controller-tools/", "controller-tools/envtest/",
		"controller-tools/envtest/kube-apiserver", "controller-tools/envtest/etcd", "controller-tools/envtest/kubectl"}
	if !slices.Equal(names, want) {
		t.Errorf("the archive holds %q, want %q", names, want)
	}

	// setup-envtest's client downloads it, verifying the hash; HEAD requests
	// are not counted.
	head, err := http.Head(m.ArchiveURL())
	if err != nil {
		t.Fatal(err)
	}
	_ = head.Body.Close()
	if head.ContentLength != m.Size() {
		t.Errorf("HEAD says the archive has %d bytes, Size() = %d", head.ContentLength, m.Size())
	}
	item := versions.PlatformItem{Platform: plat, Hash: &versions.Hash{Type: versions.SHA512HashType, Encoding: versions.HexHashEncoding, Value: m.Hash()}}
	if err := client.GetVersion(context.Background(), v, item, io.Discard); err != nil {
		t.Errorf("GetVersion() = %v", err)
	}
	if got := m.ArchiveRequests(); got != 2 {
		t.Errorf("ArchiveRequests() = %d after two GETs and a HEAD, want 2", got)
	}
	if got := m.IndexRequests(); got != 2 {
		t.Errorf("IndexRequests() = %d, want 2 (ListVersions and GetVersion)", got)
	}

	// Corrupted, the archive keeps its size and fails the hash.
	m.Corrupt()
	if err := client.GetVersion(context.Background(), v, item, io.Discard); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("GetVersion() of the corrupted archive = %v, want a checksum mismatch", err)
	}
	if corrupted := get(t, m.ArchiveURL()); len(corrupted) != len(archive) || bytes.Equal(corrupted, archive) {
		t.Errorf("the corrupted archive has %d bytes (equal: %t), want %d other bytes", len(corrupted), bytes.Equal(corrupted, archive), len(archive))
	}
}

func TestTheArchiveIsPackedOncePerFolder(t *testing.T) {
	t.Parallel()
	dir := assets(t)
	first, err := Start(dir, "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Close() }()
	second, err := Start(dir, "1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = second.Close() }()
	if first.archive != second.archive {
		t.Error("a second mirror of the same folder packed the archive again")
	}
	// A binary that changes is packed anew.
	if err := os.WriteFile(filepath.Join(dir, "etcd"), []byte("#!/bin/sh\necho etcd, rebuilt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	third, err := Start(dir, "1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = third.Close() }()
	if third.Hash() == first.Hash() {
		t.Error("the archive of a changed folder has the hash of the old")
	}
}

func TestStartSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	partial := t.TempDir()
	if err := os.WriteFile(filepath.Join(partial, "kube-apiserver"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, version, want string
	}{
		{partial, "1.37.2", "it must hold kube-apiserver, etcd, kubectl"},
		{assets(t), "1.37", `"1.37" is not a Kubernetes version (X.Y.Z)`},
	} {
		if m, err := Start(tc.dir, tc.version); err == nil || !strings.Contains(err.Error(), tc.want) {
			if m != nil {
				_ = m.Close()
			}
			t.Errorf("Start(%s, %s) = %v, want an error saying %q", tc.dir, tc.version, err, tc.want)
		}
	}
}
