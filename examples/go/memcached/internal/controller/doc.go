// Package controller holds the Memcached reconciler: the operator-sdk
// tutorial's, an ordinary controller-runtime reconciler written against
// client.Client, and the two ways to run it, in a controller-runtime manager
// (SetupWithManager) and in a polyop sidecar (SetupWithServer).
package controller
