package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// WriteArchive writes idx to path as an OCI image layout in a tar file (what
// skopeo calls an oci-archive): oci-layout, an index.json whose one
// descriptor, the image index, is named ref (AnnotationRefName), and the
// blobs. The layout is written by go-containerregistry's layout package into
// a temporary folder, then put into the tar file in lexical order, every
// entry owned by root with the time mtime and a fixed mode, so that the same
// index gives the same bytes. The file appears at path complete or not at
// all.
func WriteArchive(path string, idx v1.ImageIndex, ref string, mtime time.Time) (err error) {
	dir, err := os.MkdirTemp("", "polyop-image-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	top := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add:        idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{AnnotationRefName: ref}},
	})
	if _, err := layout.Write(dir, top); err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}

	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tarFolder(tmp, dir, mtime.UTC().Truncate(time.Second)); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// tarFolder writes the files and folders under dir to w as a tar stream, in
// lexical order, with the time mtime, owned by root, folders 0755 and files
// 0644.
func tarFolder(w io.Writer, dir string, mtime time.Time) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, info.Size()
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return errors.New(p + " is neither a file nor a folder")
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
