package main

import (
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

func TestNewServerDescribesTheWebsiteController(t *testing.T) {
	t.Parallel()
	srv, err := newServer(sidecar.Options{Name: name, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	resp := sidecartest.New(t, srv).Describe()
	if resp.GetName() != "website-operator" || len(resp.GetControllers()) != 1 {
		t.Fatalf("Describe = %v", resp)
	}
	c := resp.GetControllers()[0]
	if k := c.GetForKind(); k.GetGroup() != "examples.polyop.dev" || k.GetKind() != "Website" {
		t.Errorf("for_kind = %v", k)
	}
	var owns []string
	for _, o := range c.GetOwns() {
		owns = append(owns, o.GetKind().GetKind())
	}
	if len(owns) != 3 || owns[0] != "Deployment" || !c.GetOwns()[0].GetSendObserved() || owns[1] != "Service" || owns[2] != "ConfigMap" {
		t.Errorf("owns = %v", c.GetOwns())
	}
	if len(c.GetWatches()) != 1 || c.GetWatches()[0].GetKind().GetKind() != "ConfigMap" || c.GetWatches()[0].GetFieldPath() != "spec.configMapName" {
		t.Errorf("watches = %v", c.GetWatches())
	}
}
