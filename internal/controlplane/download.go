package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/tools/setup-envtest/remote"
	"sigs.k8s.io/controller-runtime/tools/setup-envtest/store"
	"sigs.k8s.io/controller-runtime/tools/setup-envtest/versions"
	"sigs.k8s.io/yaml"
)

// IndexEnv is the environment variable that names the envtest release index
// to download the control plane from, in place of controller-tools' (a mirror
// for machines that cannot reach it, or a test's).
const IndexEnv = "POLYOP_ENVTEST_INDEX"

// IndexURL returns the envtest release index polyop downloads from:
// $POLYOP_ENVTEST_INDEX when set, else controller-tools' envtest-releases.yaml,
// setup-envtest's default (remote.DefaultIndexURL).
func IndexURL() string {
	if url := os.Getenv(IndexEnv); url != "" {
		return url
	}
	return remote.DefaultIndexURL
}

// Downloader downloads the envtest release of a Kubernetes version (the
// kube-apiserver, etcd and kubectl controller-tools publishes for each OS and
// architecture) the way controller-runtime's setup-envtest does, with its
// packages: the archive named by a release index (remote.Index, the format of
// controller-tools' envtest-releases.yaml) is downloaded and its SHA-512
// checked against the index by remote.HTTPClient, then unpacked by
// store.Store.
//
// setup-envtest's own workflow (its env package) is not used: it reports
// failures by panicking with the exit code of its command line, and prints
// nothing while it downloads. And remote.HTTPClient fetches through
// http.DefaultClient, whose timeouts are a minute and more, and says nothing
// of the archive's size: Downloader reads the index and the archive's size
// itself, with a client whose connect and TLS handshake timeouts are short,
// so that an unreachable index fails in seconds, and ends a download that
// stops receiving data.
type Downloader struct {
	// IndexURL is the release index. Defaults to IndexURL().
	IndexURL string

	// Version is the Kubernetes version to download, such as 1.37.2.
	// Defaults to Version().
	Version string

	// Printf prints the download's progress, one line per call. Defaults to
	// printing nothing.
	Printf func(format string, args ...any)

	// Interval is how often the progress is printed. Defaults to 5 seconds.
	Interval time.Duration

	// ConnectTimeout bounds looking up the address of the index's host (and
	// the archive's) and connecting to it, TLS handshake included. Defaults
	// to 10 seconds.
	ConnectTimeout time.Duration

	// IndexTimeout bounds reading the index, and asking the archive's size.
	// Defaults to 30 seconds.
	IndexTimeout time.Duration

	// StallTimeout ends a download of the archive that receives nothing for
	// this long. Defaults to 30 seconds.
	StallTimeout time.Duration
}

func (d *Downloader) defaults() {
	if d.IndexURL == "" {
		d.IndexURL = IndexURL()
	}
	if d.Version == "" {
		d.Version = Version()
	}
	if d.Printf == nil {
		d.Printf = func(string, ...any) {}
	}
	if d.Interval <= 0 {
		d.Interval = 5 * time.Second
	}
	if d.ConnectTimeout <= 0 {
		d.ConnectTimeout = 10 * time.Second
	}
	if d.IndexTimeout <= 0 {
		d.IndexTimeout = 30 * time.Second
	}
	if d.StallTimeout <= 0 {
		d.StallTimeout = 30 * time.Second
	}
}

// platform is the OS and architecture of the binaries to download: this
// machine's.
func platform() versions.Platform {
	return versions.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// Download downloads the binaries of d.Version into dir, adding them to what
// is there. It downloads and unpacks the archive in a temporary folder next
// to dir, and renames the binaries into dir only once the archive's checksum
// is verified and all of them are unpacked: a download that fails or is
// interrupted leaves dir as it was.
func (d Downloader) Download(ctx context.Context, dir string) error {
	d.defaults()
	version, err := concreteVersion(d.Version)
	if err != nil {
		return err
	}
	plat := platform()
	name := plat.ArchiveName(version)
	client := d.client()

	archive, err := d.findArchive(ctx, client, version, plat)
	if err != nil {
		return err
	}
	size, err := d.archiveSize(ctx, client, archive.SelfLink)
	if err != nil {
		return err
	}

	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp(filepath.Dir(dir), downloadPrefix(dir))
	if err != nil {
		return err
	}
	defer func() { _ = removeAll(work) }()

	packed := filepath.Join(work, name)
	d.Printf("downloading %s (%s) from %s into %s", name, formatBytes(size), archive.SelfLink, dir)
	if err := d.get(ctx, version, plat, archive, size, packed); err != nil {
		return err
	}
	unpacked, err := unpack(ctx, filepath.Join(work, "store"), version, plat, packed)
	if err != nil {
		return fmt.Errorf("unpacking %s: %w", name, err)
	}
	if missing := Missing(unpacked); len(missing) > 0 {
		return fmt.Errorf("the archive %s (%s) holds no %s: the index %s does not name an envtest release archive",
			name, archive.SelfLink, strings.Join(missing, ", "), d.IndexURL)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, bin := range Binaries {
		if err := os.Rename(filepath.Join(unpacked, bin), filepath.Join(dir, bin)); err != nil {
			return fmt.Errorf("moving %s into %s: %w", bin, dir, err)
		}
	}
	d.Printf("unpacked %s v%s into %s", strings.Join(Binaries, ", "), version, dir)
	return nil
}

// downloadPrefix is the name of the temporary folders Download makes next to
// dir, before their random part.
func downloadPrefix(dir string) string {
	return "." + filepath.Base(dir) + ".download-"
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

// client is the HTTP client of the index and of the archive's size: the
// default transport (so $HTTPS_PROXY and the like apply), with d's timeouts.
func (d Downloader) client() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if ok {
		t = t.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment}
	}
	t.DialContext = (&net.Dialer{Timeout: d.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = d.ConnectTimeout
	t.ResponseHeaderTimeout = d.IndexTimeout
	return &http.Client{Transport: t, Timeout: d.IndexTimeout}
}

// maxIndexSize bounds the index read: controller-tools' is some tens of
// kilobytes.
const maxIndexSize = 16 << 20

// findArchive reads the index and returns its archive of version for plat.
func (d Downloader) findArchive(ctx context.Context, client *http.Client, version versions.Concrete, plat versions.Platform) (remote.Archive, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.IndexURL, nil)
	if err != nil {
		return remote.Archive{}, fmt.Errorf("the envtest release index %q is not a URL: %w", d.IndexURL, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return remote.Archive{}, fmt.Errorf("reading the envtest release index: %w", timeoutNote(err, d.IndexTimeout))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return remote.Archive{}, fmt.Errorf("reading the envtest release index %s: %s", d.IndexURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIndexSize))
	if err != nil {
		return remote.Archive{}, fmt.Errorf("reading the envtest release index %s: %w", d.IndexURL, timeoutNote(err, d.IndexTimeout))
	}
	var index remote.Index
	if err := yaml.Unmarshal(body, &index); err != nil {
		return remote.Archive{}, fmt.Errorf("the envtest release index %s is not an index of envtest releases (controller-tools' envtest-releases.yaml): %w", d.IndexURL, err)
	}
	var others []versions.Concrete
	for _, release := range index.Releases {
		for archiveName, archive := range release {
			v, p := versions.ExtractWithPlatform(versions.ArchiveRE, archiveName)
			if v == nil || p != plat {
				continue
			}
			if *v == version {
				if archive.Hash == "" || archive.SelfLink == "" {
					return remote.Archive{}, fmt.Errorf("the envtest release index %s gives %s no hash or no selfLink", d.IndexURL, archiveName)
				}
				return archive, nil
			}
			others = append(others, *v)
		}
	}
	has := "none"
	if len(others) > 0 {
		slices.SortFunc(others, func(a, b versions.Concrete) int { return b.Compare(a) })
		has = ""
		for i, v := range others {
			if i == 10 {
				has += ", …"
				break
			}
			if i > 0 {
				has += ", "
			}
			has += v.String()
		}
	}
	return remote.Archive{}, fmt.Errorf("the envtest release index %s has no %s (Kubernetes %s for %s); its releases for %s: %s",
		d.IndexURL, plat.ArchiveName(version), version, plat, plat, has)
}

// archiveSize returns the size of the archive at link, or -1 when its server
// does not say. It fails when the server cannot be reached.
func (d Downloader) archiveSize(ctx context.Context, client *http.Client, link string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, link, nil)
	if err != nil {
		return -1, fmt.Errorf("the envtest release index %s links to %q, which is not a URL: %w", d.IndexURL, link, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return -1, fmt.Errorf("reaching the envtest release archive: %w", timeoutNote(err, d.IndexTimeout))
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1, nil
	}
	return resp.ContentLength, nil
}

// timeoutNote says which timeout ended a request that timed out.
func timeoutNote(err error, timeout time.Duration) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w (no answer within %s)", err, timeout)
	}
	return err
}

// get downloads archive into path through remote.HTTPClient, which verifies
// its checksum, printing the progress every d.Interval and ending the
// download when it receives nothing for d.StallTimeout.
func (d Downloader) get(ctx context.Context, version versions.Concrete, plat versions.Platform, archive remote.Archive, size int64, path string) error {
	name := plat.ArchiveName(version)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()

	getCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stalled := fmt.Errorf("received nothing for %s from %s", d.StallTimeout, archive.SelfLink)
	watchdog := time.AfterFunc(d.StallTimeout, func() { cancel(stalled) })
	defer watchdog.Stop()

	p := &downloadProgress{name: name, total: size, printf: d.Printf, start: time.Now(), now: time.Now, w: f,
		written: func() { watchdog.Reset(d.StallTimeout) }}
	stop := every(d.Interval, p.report)
	c := &remote.HTTPClient{Log: logr.Discard(), IndexURL: d.IndexURL}
	err = c.GetVersion(getCtx, version, versions.PlatformItem{Platform: plat, Hash: &versions.Hash{
		Type:     versions.SHA512HashType,
		Encoding: versions.HexHashEncoding,
		Value:    archive.Hash,
	}}, p)
	stop()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("downloading %s: %w", name, ctx.Err())
		case errors.Is(context.Cause(getCtx), stalled):
			return fmt.Errorf("downloading %s: %w", name, stalled)
		}
		return fmt.Errorf("downloading %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	p.done()
	return nil
}

// unpack unpacks the archive at packed with setup-envtest's store, rooted at
// root, and returns the folder of the binaries.
func unpack(ctx context.Context, root string, version versions.Concrete, plat versions.Platform, packed string) (string, error) {
	f, err := os.Open(packed)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	s := store.NewAt(root)
	item := store.Item{Version: version, Platform: plat}
	if err := s.Add(logr.NewContext(ctx, logr.Discard()), item, f); err != nil {
		return "", err
	}
	path, err := s.Path(item)
	if err != nil {
		return "", err
	}
	// The store makes the folder read-only; the binaries are renamed out of
	// it.
	if err := os.Chmod(path, 0o755); err != nil {
		return "", err
	}
	return path, nil
}

// removeAll removes path like os.RemoveAll, making read-only folders below it
// writable first when it must (setup-envtest's store makes its folders
// read-only).
func removeAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(path)
}

// downloadProgress counts the bytes written through it and reports them.
type downloadProgress struct {
	name    string
	total   int64 // -1 when unknown
	printf  func(format string, args ...any)
	start   time.Time
	now     func() time.Time
	w       io.Writer
	written func()

	n atomic.Int64
}

func (p *downloadProgress) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if n > 0 {
		p.n.Add(int64(n))
		if p.written != nil {
			p.written()
		}
	}
	return n, err
}

// report prints how far the download is.
func (p *downloadProgress) report() {
	n := p.n.Load()
	if p.total > 0 {
		p.printf("downloading %s: %s of %s (%d%%), %s elapsed", p.name, formatBytes(n), formatBytes(p.total), n*100/p.total, p.elapsed())
		return
	}
	p.printf("downloading %s: %s, %s elapsed", p.name, formatBytes(n), p.elapsed())
}

// done prints that the download finished.
func (p *downloadProgress) done() {
	p.printf("downloaded %s (%s) in %s, its SHA-512 checksum verified", p.name, formatBytes(p.n.Load()), p.elapsed())
}

func (p *downloadProgress) elapsed() time.Duration {
	return p.now().Sub(p.start).Round(100 * time.Millisecond)
}

// formatBytes formats a size in decimal units, as download tools print them;
// a negative one is unknown.
func formatBytes(n int64) string {
	switch {
	case n < 0:
		return "size unknown"
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1000*1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}
