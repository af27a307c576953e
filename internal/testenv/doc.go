// Package testenv gives polyop's integration tests, benchmarks and `make run`
// a real control plane and real processes. Its parts live in packages of
// their own, as controller-runtime's envtest splits its internals:
//
//   - controlplane: a kube-apiserver and etcd through envtest, from the
//     binaries `make envtest` builds from source, with CRDs, feature gates
//     and an audit log; the webhook configurations of a kubebuilder project.
//   - process: child processes with their output kept and mirrored to the
//     test log.
//   - build: the Go and TypeScript builds the tests run, once per test
//     binary.
//   - certs: a throwaway CA and mutual TLS certificates.
//   - npmregistry: an npm registry on loopback serving the packages of
//     `npm pack` tarballs, to install them as from npmjs.com.
//
// This package re-exports their everyday names (Start, Env, Build,
// StartProcess, Process, …), so that a test imports one package for the
// common case, and holds what every test shares: Eventually and Consistently,
// the tests' one way to wait on a condition, built on apimachinery's
// wait.PollUntilContextTimeout (they report what was awaited and what the
// condition saw last), and Suite, what the TestMain of an integration test
// package sets up.
package testenv
