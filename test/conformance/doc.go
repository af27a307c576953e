// Package conformance checks the Go SDK against the real host on a real API
// server (envtest), with real processes:
//
//   - the Memcached example's reconciler, an ordinary controller-runtime
//     reconciler, runs once in a controller-runtime manager with
//     controller-runtime's client and once in a sidecar behind the host with
//     the SDK's client; both runs must leave the cluster in the same state;
//   - a reconciler that indexes Jobs by their controller with a Go func and
//     lists them with client.MatchingFields, as kubebuilder's CronJob
//     tutorial does, converges in a manager and in a sidecar alike;
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
