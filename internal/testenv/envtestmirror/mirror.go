// Package envtestmirror serves a mirror of controller-tools' envtest release
// index on loopback, for tests of what downloads a control plane (polyop
// run, through POLYOP_ENVTEST_INDEX): the index, in the format of
// controller-tools' envtest-releases.yaml, lists one archive, this machine's,
// packed from a folder of control-plane binaries (KUBEBUILDER_ASSETS) as
// controller-tools packs its releases, with its SHA-512 as the index records
// it.
//
//	m, err := envtestmirror.Start(os.Getenv("KUBEBUILDER_ASSETS"), "1.37.2")
//	...
//	defer m.Close()
//	cmd.Env = append(cmd.Env, "POLYOP_ENVTEST_INDEX="+m.IndexURL())
//
// Packing takes some seconds (the binaries are some 300 MB; gzip at its
// fastest level): the archive is packed once per process and folder, and
// mirrors started later serve the same. It is kept in a temporary file that
// is removed at once, so that the OS frees it when the process exits (on
// Windows, it stays in the temporary directory).
package envtestmirror

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/tools/setup-envtest/remote"
	"sigs.k8s.io/controller-runtime/tools/setup-envtest/versions"
	"sigs.k8s.io/yaml"
)

// Binaries are the files of an envtest release archive, as controller-tools
// packs them: controller-tools/envtest/<binary>.
var Binaries = []string{"kube-apiserver", "etcd", "kubectl"}

// IndexPath is the path of the index on the mirror's server.
const IndexPath = "/envtest-releases.yaml"

// Mirror is an envtest release index and its one archive, served over HTTP on
// 127.0.0.1.
type Mirror struct {
	server  *httptest.Server
	archive *archive
	version versions.Concrete
	name    string

	corrupt       atomic.Bool
	indexGets     atomic.Int64
	archiveGets   atomic.Int64
	archiveLength int64
}

// Start packs the binaries of assetsDir (Binaries) into the envtest release
// archive of Kubernetes k8sVersion (X.Y.Z) for this machine's OS and
// architecture, and serves an index of it. Close it when done.
func Start(assetsDir, k8sVersion string) (*Mirror, error) {
	version, err := concreteVersion(k8sVersion)
	if err != nil {
		return nil, err
	}
	plat := versions.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
	a, err := packed(assetsDir)
	if err != nil {
		return nil, err
	}
	m := &Mirror{archive: a, version: version, name: plat.ArchiveName(version), archiveLength: a.size}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+IndexPath, m.serveIndex)
	mux.HandleFunc("GET "+m.archivePath(), m.serveArchive)
	m.server = httptest.NewServer(mux)
	return m, nil
}

// IndexURL is the URL of the index: what POLYOP_ENVTEST_INDEX (or
// setup-envtest's --index) takes.
func (m *Mirror) IndexURL() string { return m.server.URL + IndexPath }

// ArchiveURL is the URL of the archive, its selfLink in the index.
func (m *Mirror) ArchiveURL() string { return m.server.URL + m.archivePath() }

// ArchiveName is the archive's name, envtest-v<version>-<os>-<arch>.tar.gz.
func (m *Mirror) ArchiveName() string { return m.name }

// Hash is the archive's SHA-512, hex-encoded, as the index records it.
func (m *Mirror) Hash() string { return m.archive.hash }

// Size is the archive's size in bytes.
func (m *Mirror) Size() int64 { return m.archiveLength }

// IndexRequests is how many times the index was read.
func (m *Mirror) IndexRequests() int { return int(m.indexGets.Load()) }

// ArchiveRequests is how many times the archive was downloaded (GET
// requests; HEAD requests are not counted).
func (m *Mirror) ArchiveRequests() int { return int(m.archiveGets.Load()) }

// Corrupt makes the mirror serve the archive with one byte changed from now
// on, so that it no longer matches the hash in the index.
func (m *Mirror) Corrupt() { m.corrupt.Store(true) }

// Close stops serving, once the requests under way are answered.
func (m *Mirror) Close() error {
	m.server.Close()
	return nil
}

func (m *Mirror) archivePath() string {
	return fmt.Sprintf("/releases/download/envtest-v%s/%s", m.version, m.name)
}

// serveIndex serves the index, as controller-tools' envtest-releases.yaml
// lists its releases.
func (m *Mirror) serveIndex(w http.ResponseWriter, _ *http.Request) {
	m.indexGets.Add(1)
	index := remote.Index{Releases: map[string]remote.Release{
		"v" + m.version.String(): {
			m.name: remote.Archive{Hash: m.archive.hash, SelfLink: m.ArchiveURL()},
		},
	}}
	data, err := yaml.Marshal(index)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(data)
}

// serveArchive serves the archive, with its length and ranges.
func (m *Mirror) serveArchive(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		m.archiveGets.Add(1)
	}
	var content io.ReaderAt = m.archive.file
	if m.corrupt.Load() {
		content = flipped{ReaderAt: content, at: m.archive.size / 2}
	}
	w.Header().Set("Content-Type", "application/gzip")
	http.ServeContent(w, r, m.name, m.archive.modTime, io.NewSectionReader(content, 0, m.archive.size))
}

// flipped reads a ReaderAt with the byte at at inverted.
type flipped struct {
	io.ReaderAt
	at int64
}

func (f flipped) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.ReaderAt.ReadAt(p, off)
	if i := f.at - off; i >= 0 && i < int64(n) {
		p[i] = ^p[i]
	}
	return n, err
}

// concreteVersion parses a Kubernetes version X.Y.Z (or vX.Y.Z).
func concreteVersion(v string) (versions.Concrete, error) {
	spec, err := versions.FromExpr(strings.TrimPrefix(v, "v"))
	if err == nil {
		if s, ok := spec.Selector.(versions.PatchSelector); ok {
			if c := s.AsConcrete(); c != nil {
				return *c, nil
			}
		}
	}
	return versions.Concrete{}, fmt.Errorf("%q is not a Kubernetes version (X.Y.Z)", v)
}

// archive is a packed envtest release archive.
type archive struct {
	file    *os.File
	size    int64
	hash    string
	modTime time.Time
}

// archives are the archives this process packed, by the folder and the
// binaries' sizes and times they were packed from.
var (
	archivesMu sync.Mutex
	archives   = map[string]*archive{}
)

// packed returns the archive of the binaries of dir, packing it unless it
// was already.
func packed(dir string) (*archive, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	key := dir
	for _, name := range Binaries {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("packing an envtest release archive of %s: %w (it must hold %s)", dir, err, strings.Join(Binaries, ", "))
		}
		if !info.Mode().IsRegular() {
			return nil, fmt.Errorf("packing an envtest release archive of %s: %s is not a file", dir, name)
		}
		key += fmt.Sprintf("|%s:%d:%d", name, info.Size(), info.ModTime().UnixNano())
	}
	archivesMu.Lock()
	defer archivesMu.Unlock()
	if a, ok := archives[key]; ok {
		return a, nil
	}
	a, err := pack(dir)
	if err != nil {
		return nil, fmt.Errorf("packing an envtest release archive of %s: %w", dir, err)
	}
	archives[key] = a
	return a, nil
}

// pack packs the binaries of dir into a gzipped tarball, as controller-tools
// packs an envtest release: controller-tools/envtest/<binary>.
func pack(dir string) (a *archive, err error) {
	f, err := os.CreateTemp("", "polyop-envtestmirror-*.tar.gz")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	hash := sha512.New()
	buf := bufio.NewWriterSize(io.MultiWriter(f, hash), 1<<20)
	gz, err := gzip.NewWriterLevel(buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	now := time.Now()
	for _, d := range []string{"controller-tools/", "controller-tools/envtest/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: now}); err != nil {
			return nil, err
		}
	}
	for _, name := range Binaries {
		if err := addFile(tw, filepath.Join(dir, name), "controller-tools/envtest/"+name); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	if err := buf.Flush(); err != nil {
		return nil, err
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	// Removed now, the file lives as long as it is open: until the process
	// exits. (Windows does not remove an open file: there it stays.)
	_ = os.Remove(f.Name())
	return &archive{file: f, size: size, hash: hex.EncodeToString(hash.Sum(nil)), modTime: now}, nil
}

// addFile writes the file at path into tw as name.
func addFile(tw *tar.Writer, path, name string) error {
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	info, err := src.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     0o755,
		Size:     info.Size(),
		ModTime:  info.ModTime(),
	}); err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	return err
}
