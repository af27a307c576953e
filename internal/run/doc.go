// Package run runs a polyop project's operator on the developer's machine
// the way it runs in a cluster: polyop run.
//
// Run finds the project (its PROJECT file), takes the cluster of the
// kubeconfig or starts a local control plane, installs the project's CRDs,
// builds and starts the sidecar (see package sidecarprocess) or attaches to
// one the user runs, starts the host (polyop host, HostCommandName) pointed
// at it, and, when the sidecar declares webhooks or conversions, serves them
// with a certificate of its own and wires the webhook configurations and
// CRD conversions to it once the host serves. With Options.ApplySamples it
// applies config/samples and waits for them to be Ready.
//
// It prints ReadyLine once everything is up, then runs until its context is
// done or a signal comes, and tears everything down in the order that
// leaves nothing behind: the webhook configurations first (one with
// failurePolicy Fail would refuse every write of its kind), then the host,
// the sidecar, the control plane and the temporary files. A second signal
// stops it at once.
package run
