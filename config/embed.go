// Package config holds polyop's kustomize base: the pod of the host and the
// sidecar (manager), the host's ServiceAccount (rbac), the metrics Service
// and patch (default), and the optional parts an overlay turns on (webhook,
// certmanager, selfsigned, prometheus, prometheus-rules, grafana,
// network-policy).
//
// This repository's overlays (config/overlays) deploy the examples on it, and
// polyop init copies it, through Base, into every project's config/polyop, so
// that a project deploys the same pod as this repository.
package config

import (
	"embed"
	"io/fs"
)

//go:embed default manager rbac webhook certmanager selfsigned prometheus prometheus-rules grafana network-policy
var base embed.FS

// Base is polyop's kustomize base: the folders default, manager, rbac,
// webhook, certmanager, selfsigned, prometheus, prometheus-rules, grafana and
// network-policy, as they are in this folder.
func Base() fs.FS { return base }
