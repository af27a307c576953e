// Command image builds polyop's host image, without a container engine, as an
// OCI image layout in a tar file: an index of one image per platform, each the
// host at /host and the sidecar probe at /probe on an empty base, with CA
// certificates and a non-root user 65532, as the Dockerfile builds it. `make
// release-image` runs it with the binaries it has cross-compiled:
//
//	go run ./image -bin DIR -platforms "linux/amd64 linux/arm64" \
//		-ref polyop-host:1.2.3 -version 1.2.3 \
//		-source https://github.com/polyop/polyop -revision <commit> \
//		-created <unix seconds> -o polyop-host-1.2.3.oci.tar
//
// DIR holds host-<os>-<arch> and probe-<os>-<arch> for every platform. The
// same inputs give the same bytes: every time in the image and in the tar
// file is -created (SOURCE_DATE_EPOCH, or the commit's time), every owner is
// root unless it is the non-root user's home, and nothing of the build
// machine enters it (the CA certificates come from the Go module
// golang.org/x/crypto/x509roots/fallback, at the version go.mod pins).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run builds the image the flags in args describe, reporting on stderr.
func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		bin       = fs.String("bin", "", "The folder of the binaries: host-<os>-<arch> and probe-<os>-<arch> for each platform (required).")
		platforms = fs.String("platforms", "", `The image's platforms, os/arch separated by spaces or commas, such as "linux/amd64 linux/arm64" (required).`)
		ref       = fs.String("ref", "", "The image reference the layout names (org.opencontainers.image.ref.name), such as polyop-host:1.2.3 (required).")
		version   = fs.String("version", "", "The version the image is annotated with (org.opencontainers.image.version) (required).")
		source    = fs.String("source", "", "The URL of the source repository (org.opencontainers.image.source).")
		revision  = fs.String("revision", "", "The source revision the image is built from (org.opencontainers.image.revision).")
		created   = fs.String("created", "", "The image's creation time in seconds since the Unix epoch, such as SOURCE_DATE_EPOCH or the commit's time (required).")
		out       = fs.String("o", "", "The tar file to write (required).")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: image takes flags only", fs.Arg(0))
	}
	for name, value := range map[string]string{"bin": *bin, "platforms": *platforms, "ref": *ref, "version": *version, "created": *created, "o": *out} {
		if value == "" {
			return fmt.Errorf("-%s is required", name)
		}
	}
	seconds, err := strconv.ParseInt(*created, 10, 64)
	if err != nil {
		return fmt.Errorf("-created %q: not a number of seconds since the Unix epoch", *created)
	}
	o := Options{
		Ref:      *ref,
		Version:  *version,
		Source:   *source,
		Revision: *revision,
		Created:  time.Unix(seconds, 0).UTC(),
	}
	if o.CACertificates, err = CACertificates(); err != nil {
		return err
	}
	for _, p := range strings.FieldsFunc(*platforms, func(r rune) bool { return r == ' ' || r == ',' }) {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || goos == "" || goarch == "" || strings.Contains(goarch, "/") {
			return fmt.Errorf("-platforms: %q is not os/arch", p)
		}
		o.Platforms = append(o.Platforms, Platform{
			OS:           goos,
			Architecture: goarch,
			Host:         filepath.Join(*bin, "host-"+goos+"-"+goarch),
			Probe:        filepath.Join(*bin, "probe-"+goos+"-"+goarch),
		})
	}
	if len(o.Platforms) == 0 {
		return errors.New("-platforms names no platform")
	}

	idx, err := Build(o)
	if err != nil {
		return err
	}
	if err := WriteArchive(*out, idx, o.Ref, o.Created); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	names := make([]string, len(o.Platforms))
	for i, p := range o.Platforms {
		names[i] = p.OS + "/" + p.Architecture
	}
	fmt.Fprintf(stderr, "Wrote %s: %s (%s) for %s\n", *out, o.Ref, digest, strings.Join(names, " "))
	return nil
}
