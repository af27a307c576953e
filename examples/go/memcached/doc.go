// Command memcached is the operator-sdk tutorial's Memcached operator as a
// polyop sidecar: for every Memcached (examples.polyop.dev/v1) it keeps a
// Deployment of spec.size memcached pods, reports it in the Available
// condition and cleans up through a finalizer.
//
// The reconciler is an ordinary controller-runtime reconciler written against
// client.Client. By default the command serves it on --address for a polyop
// host, with a client backed by the host's Cluster service; with --standalone
// it runs the very same reconciler in a controller-runtime manager against the
// cluster of --kubeconfig, to compare the two.
//
// Usage:
//
//	memcached [--address unix:///var/run/polyop/sidecar.sock] [--image memcached:1.6.26-alpine3.19] [--max-message-size 64Mi] [--zap-log-level info]
//	memcached --standalone [--kubeconfig path] [--namespace ns]
package main
