// Package manifests renders Kubernetes manifests from a sidecar's
// description, so that no one writes by hand what the sidecar already
// declares.
//
// Webhooks renders the MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration that send the API server's admission calls to
// the host's endpoints, and the conversion stanza of each converted kind's
// CRD, as a partial CustomResourceDefinition to merge into the CRD (a
// kustomize patch, or `kubectl patch --type merge`).
//
// RBAC renders the roles the host needs for the kinds the sidecar's
// controllers reconcile, own and watch, with their bindings to the host's
// ServiceAccount: a Role in each namespace a controller is limited to, a
// ClusterRole only for what is cluster-wide, and the leader election Role.
package manifests
