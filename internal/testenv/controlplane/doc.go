// Package controlplane runs a real kube-apiserver and etcd for polyop's
// tests, through controller-runtime's envtest, from the binaries `make
// envtest` builds from source (KUBEBUILDER_ASSETS, or bin/k8s-<version> in
// the repository): Start and StartWith, with CRDs, feature gates and an
// audit log of chosen users' writes (Env.AuditLog, Env.AddUser); Lazy, one
// control plane shared by a package's tests; InstallWebhookManifests, a
// kubebuilder project's webhook configurations pointed at a local server.
package controlplane
