package controlplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Installer makes sure that a folder holds the control plane of Version():
// it reuses what the folder holds, else downloads the envtest release of
// Version() (Downloader), else, when the download fails and Go is installed,
// builds it from source (Builder). It holds a lock file next to the folder
// (<folder>.lock) meanwhile, so that polyops started at once download or
// build it once: the others wait, then find it.
type Installer struct {
	// Dir is the folder. Defaults to CacheDir(Version()).
	Dir string

	// IndexURL is the envtest release index to download from. Defaults to
	// IndexURL(): $POLYOP_ENVTEST_INDEX, else controller-tools'.
	IndexURL string

	// Go is the go command to build with when the download fails. Defaults
	// to "go" on PATH.
	Go string

	// Printf prints what the installer does, and the progress of a download
	// or a build, one line per call. Defaults to printing nothing.
	Printf func(format string, args ...any)

	// Interval is how often the progress of a download or a build is
	// printed. Defaults to 5 seconds.
	Interval time.Duration
}

// Ensure returns the folder of a complete control plane: $KUBEBUILDER_ASSETS
// when set (it must hold every one of Binaries), else the folder in.Install
// returns.
func Ensure(ctx context.Context, in Installer) (string, error) {
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" {
		if missing := Missing(assets); len(missing) > 0 {
			return "", fmt.Errorf("KUBEBUILDER_ASSETS is %s, which has no %s: point it at a folder holding %s, or unset it to have polyop download them",
				assets, strings.Join(missing, ", "), strings.Join(Binaries, ", "))
		}
		return assets, nil
	}
	return in.Install(ctx)
}

// Install returns in.Dir once it holds every one of Binaries: at once, and
// without the network, when it does already; else once they are downloaded,
// or, when the download fails and Go is installed, built from source. When
// neither works, its error says every way to get a control plane.
func (in Installer) Install(ctx context.Context) (string, error) {
	if in.Dir == "" {
		dir, err := CacheDir(Version())
		if err != nil {
			return "", err
		}
		in.Dir = dir
	}
	if in.IndexURL == "" {
		in.IndexURL = IndexURL()
	}
	if in.Go == "" {
		in.Go = "go"
	}
	if in.Printf == nil {
		in.Printf = func(string, ...any) {}
	}
	if len(Missing(in.Dir)) == 0 {
		return in.Dir, nil
	}

	dir, err := filepath.Abs(in.Dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	lockPath := dir + ".lock"
	unlock, err := lock(ctx, lockPath, func() {
		in.Printf("waiting for another polyop, which is setting up the control plane in %s (it holds %s)", dir, lockPath)
	})
	if err != nil {
		return "", fmt.Errorf("waiting for the lock on the control plane in %s: %w", dir, err)
	}
	defer unlock()
	if len(Missing(dir)) == 0 {
		in.Printf("the control plane in %s is set up", dir)
		return dir, nil
	}
	removeInterruptedDownloads(dir)

	version := Version()
	downloadErr := Downloader{IndexURL: in.IndexURL, Version: version, Printf: in.Printf, Interval: in.Interval}.Download(ctx, dir)
	if downloadErr == nil {
		return dir, nil
	}
	if ctx.Err() != nil {
		return "", downloadErr
	}
	if _, err := exec.LookPath(in.Go); err != nil {
		return "", fmt.Errorf("no local control plane (%s of Kubernetes %s): downloading them failed: %w; and Go, which would build them from source instead, is not installed (%v). "+
			"To get one, let polyop reach the envtest release index %s, or set %s to a mirror of it; or install Go, and polyop builds them, once, into %s; "+
			"or set KUBEBUILDER_ASSETS to a folder holding them",
			strings.Join(Binaries, ", "), version, downloadErr, err, in.IndexURL, IndexEnv, dir)
	}
	in.Printf("downloading the envtest binaries of Kubernetes %s failed: %v; building from source with go instead", version, downloadErr)
	if err := (Builder{Go: in.Go, Printf: in.Printf, Interval: in.Interval}).Build(ctx, dir); err != nil {
		return "", fmt.Errorf("%w (polyop built from source because downloading the envtest binaries failed: %w)", err, downloadErr)
	}
	return dir, nil
}

// removeInterruptedDownloads removes what downloads into dir that were
// killed left behind. Only the holder of dir's lock calls it, so no download
// into dir is under way.
func removeInterruptedDownloads(dir string) {
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), downloadPrefix(dir)+"*"))
	for _, path := range left {
		_ = removeAll(path)
	}
}
