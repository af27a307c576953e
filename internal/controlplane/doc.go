// Package controlplane builds the binaries of a local control plane
// (kube-apiserver, etcd and kubectl, for controller-runtime's envtest) from
// source, through the Go module proxy: no release download is needed, only Go.
//
// The source is the tools module of hack/tools/envtest, a module of its own so
// that k8s.io/kubernetes never enters polyop's dependency graph. A copy of its
// go.mod, go.sum and etcd/main.go is embedded here (go generate refreshes it;
// a test checks that it is current), so that an installed polyop can build a
// control plane with nothing but Go: polyop run builds one, once per user and
// Kubernetes version, into the user's cache directory (see CacheDir), and this
// repository's `make envtest` builds its own from hack/tools/envtest with the
// same code (the hidden `polyop envtest` command).
//
// The first build takes several minutes: Builder prints how many packages it
// has compiled every few seconds rather than going silent, and renames the
// binaries into place only once all of them are built, so an interrupted build
// never leaves half a binary behind.
package controlplane
