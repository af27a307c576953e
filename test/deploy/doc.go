// Package deploy tests what deploys polyop to a cluster: the kustomizations in
// config/, the Dockerfiles and the probe, against a real API server (envtest).
//
// Every kustomization is rendered with kubectl's kustomize and applied to the
// API server: for real where envtest can hold the object, as a server-side
// dry run for the admission webhook configurations (which would intercept the
// other tests' requests), so the API server validates every manifest against
// its schemas. cert-manager's and the Prometheus Operator's kinds are
// validated against CRDs in testdata/crds that hold the fields polyop uses,
// with the upstream names and types.
//
// Beyond the schemas, the tests check what a schema cannot: the pod's shape
// (two containers sharing the socket volume at the path the flags use, the
// probes, the security context, the probe binary the init container copies),
// that the RBAC is exactly what `host rbac` prints for the sidecar's
// description, and that the host, run with the Deployment's arguments and as
// the Deployment's ServiceAccount, reconciles a sample object with that RBAC
// alone. The Dockerfiles cannot be built here (no container engine): the
// tests check what they can without building them.
package deploy
