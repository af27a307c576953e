// Package crdgen tests the CRDs that polyop's schema generators make from a
// language's own types against a real API server (envtest's kube-apiserver and
// etcd): each generated CRD must be accepted without warnings, a sample of it
// must be stored with its defaults, its status and scale subresources must
// work, kubectl must print its columns and know its short names, and an
// invalid object must be refused with the field at fault named.
//
// The Python generator is polyop.crd, run from the repository's virtualenv
// (make .venv) on testdata/python. The TypeScript generator is
// @polyop/sidecar/crd and its polyop-crd command, run with node on
// testdata/widget.mjs, one field per supported marker.
package crdgen
