package main

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

func TestNewServerDescribesTheMaintenanceWindowController(t *testing.T) {
	t.Parallel()
	srv, err := newServer(sidecar.Options{Name: name, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	resp := sidecartest.New(t, srv).Describe()
	if resp.GetName() != "maintenancewindow" || len(resp.GetControllers()) != 1 {
		t.Fatalf("Describe = %v", resp)
	}
	if k := resp.GetControllers()[0].GetForKind(); k.GetGroup() != "examples.polyop.dev" || k.GetVersion() != "v1" || k.GetKind() != "MaintenanceWindow" {
		t.Errorf("for_kind = %v", k)
	}
}

func TestNewServerDescribesTheWebhooksAndTheConversion(t *testing.T) {
	t.Parallel()
	srv, err := newServer(sidecar.Options{Name: name, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	resp := sidecartest.New(t, srv).Describe()
	if len(resp.GetWebhooks()) != 1 {
		t.Fatalf("webhooks = %v, want one", resp.GetWebhooks())
	}
	wh := resp.GetWebhooks()[0]
	if wh.GetKind().GetVersion() != "v1" || !wh.GetDefault() || !wh.GetValidate() || len(wh.GetOperations()) != 3 {
		t.Errorf("webhook = %v, want default and validate of v1 on create, update and delete", wh)
	}
	if len(resp.GetConversions()) != 1 || strings.Join(resp.GetConversions()[0].GetVersions(), ",") != "v1,v1beta1" {
		t.Errorf("conversions = %v, want MaintenanceWindow between v1 and v1beta1", resp.GetConversions())
	}
}
