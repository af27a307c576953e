package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The OCI annotations the image carries, on the index and on each manifest
// (and as labels in each image's config).
const (
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationCreated  = "org.opencontainers.image.created"
	// AnnotationRefName names the image in the layout's index.json:
	// skopeo's oci-archive:FILE:REF and the registry tools read it.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// The user the host runs as: numeric, so that the kubelet can verify
// runAsNonRoot; named nonroot in /etc/passwd and /etc/group, as in the
// distroless images.
const (
	NonRootUID  = 65532
	NonRootHome = "/home/nonroot"
	User        = "65532:65532"
)

// The files of the image.
const (
	HostPath           = "/host"
	ProbePath          = "/probe"
	CACertificatesPath = "/etc/ssl/certs/ca-certificates.crt"
	PasswdPath         = "/etc/passwd"
	GroupPath          = "/etc/group"
)

// Passwd and Group are the image's /etc/passwd and /etc/group: root, nobody
// and the user the host runs as.
const (
	Passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	Group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"nonroot:x:65532:\n"
)

// Env is the environment of the image's config: the PATH docker build gives
// an image built from scratch.
var Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// Platform is one image of the index: a platform and the static binaries
// built for it.
type Platform struct {
	// OS and Architecture are the platform as Go names it (GOOS, GOARCH);
	// only linux is supported.
	OS, Architecture string
	// Host and Probe are the paths of the host (cmd/host) and the sidecar
	// probe (cmd/probe) built for the platform.
	Host, Probe string
}

// Options say what Build builds.
type Options struct {
	// Platforms are the images of the index, in its order.
	Platforms []Platform
	// Ref is the reference the image is published as, such as
	// polyop-host:1.2.3, which WriteArchive names it by.
	Ref string
	// Version, Source and Revision are the image's version, the URL of its
	// source repository and the source revision it is built from, for its
	// annotations; an empty Source or Revision is left out.
	Version, Source, Revision string
	// Created is every time in the image: its creation time, its history's
	// and its files' modification times. SOURCE_DATE_EPOCH or the commit's
	// time makes the image reproducible.
	Created time.Time
	// CACertificates is the PEM bundle at CACertificatesPath, such as
	// CACertificates returns.
	CACertificates []byte
}

// Annotations are the OCI annotations of the index and of each manifest.
func (o Options) Annotations() map[string]string {
	a := map[string]string{
		AnnotationVersion: o.Version,
		AnnotationCreated: o.Created.UTC().Format(time.RFC3339),
	}
	if o.Source != "" {
		a[AnnotationSource] = o.Source
	}
	if o.Revision != "" {
		a[AnnotationRevision] = o.Revision
	}
	return a
}

// Build returns the image index of o: one OCI image per platform, each of
// three layers, the base (CA certificates, /etc/passwd, /etc/group, the
// non-root user's home), /probe and /host, in the order that lets an update
// of the host reuse the others. The base layer is the same for every
// platform.
func Build(o Options) (v1.ImageIndex, error) {
	if len(o.Platforms) == 0 {
		return nil, errors.New("no platform to build the image for")
	}
	if o.Created.IsZero() {
		return nil, errors.New("no creation time: set one (SOURCE_DATE_EPOCH or the commit's time) so that the image is reproducible")
	}
	if o.Version == "" {
		return nil, errors.New("no version to annotate the image with")
	}
	if len(o.CACertificates) == 0 {
		return nil, errors.New("no CA certificates")
	}
	created := o.Created.UTC().Truncate(time.Second)
	base, err := newLayer(created, []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(Group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(Passwd)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: o.CACertificates},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, owner: NonRootUID},
	})
	if err != nil {
		return nil, fmt.Errorf("the base layer: %w", err)
	}

	seen := map[string]bool{}
	adds := make([]mutate.IndexAddendum, 0, len(o.Platforms))
	for _, p := range o.Platforms {
		name := p.OS + "/" + p.Architecture
		if seen[name] {
			return nil, fmt.Errorf("platform %s is named twice", name)
		}
		seen[name] = true
		img, err := platformImage(o, created, p, base)
		if err != nil {
			return nil, fmt.Errorf("the image for %s: %w", name, err)
		}
		adds = append(adds, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture}},
		})
	}
	idx := mutate.AppendManifests(empty.Index, adds...)
	return mutate.Annotations(idx, o.Annotations()).(v1.ImageIndex), nil
}

// platformImage is the image of one platform: the base layer, then the
// probe's, then the host's, with the config of the Dockerfile's image.
func platformImage(o Options, created time.Time, p Platform, base v1.Layer) (v1.Image, error) {
	if p.OS != "linux" {
		return nil, fmt.Errorf("the host image is a Linux image: %s/%s is not a linux platform", p.OS, p.Architecture)
	}
	var layers []mutate.Addendum
	layers = append(layers, mutate.Addendum{
		Layer: base,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "polyop release-image: " + CACertificatesPath +
			" (" + caSource() + "), " + PasswdPath + ", " + GroupPath + ", " + NonRootHome},
	})
	for _, bin := range []struct{ src, dst, cmd string }{{p.Probe, ProbePath, "cmd/probe"}, {p.Host, HostPath, "cmd/host"}} {
		data, err := os.ReadFile(bin.src)
		if err != nil {
			return nil, err
		}
		if err := checkBinary(bin.src, data, p.Architecture); err != nil {
			return nil, err
		}
		l, err := newLayer(created, []file{{name: bin.dst[1:], mode: 0o755, data: data}})
		if err != nil {
			return nil, fmt.Errorf("the layer of %s: %w", bin.dst, err)
		}
		layers = append(layers, mutate.Addendum{
			Layer:   l,
			History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "polyop release-image: " + bin.dst + " (" + bin.cmd + ")"},
		})
	}

	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(img, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.OS = p.OS
	cf.Architecture = p.Architecture
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{HostPath},
		Env:        Env,
		Labels:     o.Annotations(),
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, o.Annotations()).(v1.Image), nil
}

// elfMachines are the ELF machines of the Go architectures a Linux image is
// built for.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"386":     elf.EM_386,
	"arm":     elf.EM_ARM,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// checkBinary fails unless data is an ELF executable for arch that needs no
// dynamic loader: the image has no libc, so a binary built with cgo would
// not start in it.
func checkBinary(path string, data []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable: %w", path, err)
	}
	defer f.Close()
	want, ok := elfMachines[arch]
	if !ok {
		return fmt.Errorf("%s: unsupported architecture %q", path, arch)
	}
	if f.Machine != want {
		return fmt.Errorf("%s is built for %s, not for %s (%s)", path, f.Machine, arch, want)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically (build it with CGO_ENABLED=0): the image has no dynamic loader", path)
		}
	}
	return nil
}

// file is an entry of a layer.
type file struct {
	name  string // relative to the root; a directory's ends in /
	mode  int64
	owner int // the uid and gid
	dir   bool
	data  []byte
}

// newLayer returns a gzipped OCI layer of files, in their order, every entry
// with the time mtime, so that the same files make the same layer.
func newLayer(mtime time.Time, files []file) (v1.Layer, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, f := range files {
		h := &tar.Header{
			Name:     f.name,
			Mode:     f.mode,
			Uid:      f.owner,
			Gid:      f.owner,
			ModTime:  mtime,
			Typeflag: tar.TypeReg,
			Size:     int64(len(f.data)),
			Format:   tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	// compress/gzip writes no name and no time into the header: the same
	// tar gives the same bytes.
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	compressed := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// CACertificates returns the CA certificates of the image, PEM-encoded: the
// roots of Mozilla's NSS trust store that golang.org/x/crypto/x509roots/fallback
// holds at the version go.mod pins, the same on every build machine. Roots the
// store trusts only with a constraint (certificates issued before a
// distrust-after date) are left out: a PEM bundle cannot carry the
// constraint, and a program reading the file would trust them without it.
func CACertificates() ([]byte, error) {
	var out bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
	}
	if out.Len() == 0 {
		return nil, errors.New("golang.org/x/crypto/x509roots/fallback/bundle holds no unconstrained root")
	}
	return out.Bytes(), nil
}

// caSource names the module the CA certificates come from, with its version
// when the build records it.
func caSource() string {
	const module = "golang.org/x/crypto/x509roots/fallback"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == module {
				return module + " " + dep.Version
			}
		}
	}
	return module
}
