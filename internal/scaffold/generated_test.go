package scaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyop/polyop/internal/description"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func TestWriteDescribedNamesTheProjectsKindsAsItsPROJECTFileDoesAndDropsStaleConversions(t *testing.T) {
	root := t.TempDir()
	// Octopus's plural is not the one guessed from the kind (octopuses),
	// and it is cluster-scoped: only the PROJECT file knows.
	p := &Project{Name: "fleet", Domain: "example.com", Resources: []Resource{
		{Group: "ship", Domain: "example.com", Version: "v1", Kind: "Octopus", Plural: "octopi", API: true, Controller: true},
		{Group: "ship", Domain: "example.com", Version: "v2", Kind: "Octopus", Plural: "octopi", API: true},
	}}
	v1 := schema.GroupVersionKind{Group: "ship.example.com", Version: "v1", Kind: "Octopus"}
	desc := &description.Description{
		Name:        "fleet",
		Controllers: []description.Controller{{Name: "octopus", GVK: v1}},
		Webhooks: []description.Webhook{{GVK: v1, Default: true, Validate: true, TimeoutSeconds: 10,
			Operations: []polyopv1alpha1.Operation{polyopv1alpha1.Operation_OPERATION_CREATE, polyopv1alpha1.Operation_OPERATION_UPDATE}}},
		Conversions: []description.Conversion{{GroupKind: v1.GroupKind(), Versions: []string{"v1", "v2"}}},
	}
	files, err := WriteDescribed(root, p, desc)
	if err != nil {
		t.Fatalf("WriteDescribed: %v", err)
	}
	if want := []string{RoleFile, WebhooksFile, ConversionFile, WebhookKustomization}; strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("WriteDescribed wrote %v, want %v", files, want)
	}
	for file, wants := range map[string][]string{
		RoleFile:             {"  - octopi\n  verbs:\n  - get\n  - list\n  - watch\n", "  - octopi/status\n"},
		WebhooksFile:         {"kind: MutatingWebhookConfiguration", "kind: ValidatingWebhookConfiguration", "    resources:\n    - octopi\n", "name: webhook\n      namespace: system\n"},
		ConversionFile:       {"name: octopi.ship.example.com", "strategy: Webhook", "name: webhook\n          namespace: system\n          path: /convert"},
		WebhookKustomization: {"- manifests.yaml", "- path: conversion.yaml", "name: webhook-ca-injector", "        - octopi.ship.example.com\n"},
	} {
		got := read(t, root, file)
		for _, want := range wants {
			if !strings.Contains(got, want) {
				t.Errorf("%s has no %q:\n%s", file, want, got)
			}
		}
		if strings.Contains(got, "octopuses") {
			t.Errorf("%s names the guessed resource octopuses:\n%s", file, got)
		}
	}

	// The sidecar no longer converts, nor declares webhooks.
	desc.Webhooks, desc.Conversions = nil, nil
	if _, err := WriteDescribed(root, p, desc); err != nil {
		t.Fatalf("WriteDescribed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(ConversionFile))); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v): the webhook component would patch the CRD with a stale conversion", ConversionFile, err)
	}
	if got := read(t, root, WebhookKustomization); strings.Contains(got, "- path: conversion.yaml") || strings.Contains(got, "patches:") {
		t.Errorf("%s still patches:\n%s", WebhookKustomization, got)
	}
	if got := read(t, root, WebhooksFile); strings.Contains(got, "kind:") {
		t.Errorf("%s still holds objects:\n%s", WebhooksFile, got)
	}
}
