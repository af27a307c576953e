// Package hostcmd is the polyop host's command line: the flags of
// internal/host, the subcommands that print what the sidecar's description
// implies (describe, webhooks, rbac) or what a sharded host's ring looks
// like (ring), and running the host. Both cmd/host and
// `polyop host` (which `polyop run` starts, so that polyop carries its own
// host) call Main.
package hostcmd
