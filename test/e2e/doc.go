// Package e2e tests the polyop host end to end: a real kube-apiserver and etcd
// (envtest), the real host binary and real sidecar processes talking gRPC over
// real unix sockets.
//
// Most tests drive test/testsidecar, a sidecar whose behaviour is set by
// annotations on the object and which logs every Reconcile call it receives,
// so a test can assert what the host sent and when. One test runs the
// MaintenanceWindow example sidecar unchanged.
package e2e
