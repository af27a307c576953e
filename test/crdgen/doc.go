// Package crdgen tests the CRDs the TypeScript SDK writes from TypeBox types
// (@polyop/sidecar/crd, the polyop-crd command) against a real kube-apiserver
// and etcd (envtest): the CRDs of testdata/widget.mjs, one field per supported
// marker, are accepted and served; a valid Widget is stored with its defaults;
// objects that break a marker's rule are refused with the field named; kubectl
// prints the columns and knows the short name; the scale subresource reads the
// replicas.
package crdgen
