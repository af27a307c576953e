package main

import (
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
