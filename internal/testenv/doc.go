// Package testenv gives polyop's integration tests, benchmarks and `make run`
// a real control plane and real processes.
//
// Start runs a kube-apiserver and etcd through controller-runtime's envtest,
// from the binaries `make envtest` builds from source (KUBEBUILDER_ASSETS, or
// bin/k8s-<version> in the repository), with the given CRDs installed, and
// writes an admin kubeconfig that child processes and kubectl can use. Build
// compiles a main package of the module once per test binary; Start of a
// Process runs it with its output captured and mirrored to the test log.
//
// Eventually and Consistently are the tests' one way to wait on a condition,
// built on apimachinery's wait.PollUntilContextTimeout: they report what was
// awaited and what the condition saw last.
package testenv
