// Package controlplane provides the binaries of a local control plane
// (kube-apiserver, etcd and kubectl, for controller-runtime's envtest) of the
// Kubernetes version polyop is built for (Version()), in the user's cache
// directory (CacheDir), for polyop run.
//
// Ensure takes the first of these that works: $KUBEBUILDER_ASSETS; the cache
// directory, when it holds every binary (no network then); a download of the
// envtest release controller-tools publishes for this OS and architecture;
// when that fails and Go is installed, a build from source. Without either,
// its error names every way to get one.
//
// The download (Downloader) goes the way of controller-runtime's
// setup-envtest, with its packages: the archive the release index names
// (remote.Index, controller-tools' envtest-releases.yaml by default, or the
// mirror $POLYOP_ENVTEST_INDEX names) is downloaded and its SHA-512 checked
// against the index (remote.HTTPClient), then unpacked (store.Store) next to
// the cache directory and renamed into it only once complete. It prints the
// bytes downloaded every few seconds, fails in seconds when the index cannot
// be reached, and ends a download that stops receiving data.
//
// The build (Builder) compiles the tools module of hack/tools/envtest, a
// module of its own so that k8s.io/kubernetes never enters polyop's
// dependency graph. A copy of its go.mod, go.sum and etcd/main.go is embedded
// here (go generate refreshes it; a test checks that it is current), so that
// an installed polyop can build a control plane with nothing but Go; this
// repository's `make envtest` builds its own from hack/tools/envtest with the
// same code (the hidden `polyop envtest` command). The first build takes
// several minutes: Builder prints how many packages it has compiled every few
// seconds rather than going silent, and renames the binaries into place only
// once all of them are built, so an interrupted build never leaves half a
// binary behind.
//
// Installer does either under a lock file next to the cache directory, so
// that polyops started at once download or build the control plane once: the
// others wait for the lock, then find it.
package controlplane
