// Package conformance checks the Go SDK against the real host on a real API
// server (envtest), with real processes:
//
//   - the Memcached example's reconciler, an ordinary controller-runtime
//     reconciler, runs once in a controller-runtime manager with
//     controller-runtime's client and once in a sidecar behind the host with
//     the SDK's client; both runs must leave the cluster in the same state;
//   - a kubebuilder-style operator (indexsidecar), whose controller lists
//     its Jobs through a field index with a Go func and creates them with
//     controller references, and whose defaulting and validating webhooks
//     are controller-runtime's, runs in a manager and in a sidecar behind
//     the host with webhooks installed in the API server; both runs must
//     leave the same Crews, Jobs and refusals. docs/migrating.md quotes that
//     operator, and a test checks that its quotes are still the code;
//   - the SDK's client reads and writes through the host's Cluster service and
//     gets the API server's errors as the apierrors types controller-runtime's
//     client returns;
//   - the declarative Website example's children are applied, owned, rolled
//     on a change to the ConfigMap it watches by a field path, and pruned.
//
// Run it with the control plane `make envtest` builds:
//
//	KUBEBUILDER_ASSETS=$PWD/bin/k8s-1.37.2 go test ./test/conformance/
package conformance
