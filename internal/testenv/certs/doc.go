// Package certs makes throwaway certificates for polyop's tests: a CA, a
// server certificate for the local host and a client certificate it signed
// (NewMutualTLS), what a test of mutual TLS needs on both sides.
package certs
