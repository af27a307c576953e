package main

import (
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

func TestNewServerDescribesTheMemcachedController(t *testing.T) {
	t.Parallel()
	srv, err := newServer(sidecar.Options{Name: name, Logger: testr.New(t)}, "memcached:test")
	if err != nil {
		t.Fatal(err)
	}
	resp := sidecartest.New(t, srv).Describe()
	if resp.GetName() != "memcached-operator" || len(resp.GetControllers()) != 1 {
		t.Fatalf("Describe = %v", resp)
	}
	c := resp.GetControllers()[0]
	if k := c.GetForKind(); k.GetGroup() != "examples.polyop.dev" || k.GetVersion() != "v1" || k.GetKind() != "Memcached" {
		t.Errorf("for_kind = %v", k)
	}
	if len(c.GetOwns()) != 1 || c.GetOwns()[0].GetKind().GetKind() != "Deployment" {
		t.Errorf("owns = %v", c.GetOwns())
	}
	if c.GetFinalizer() != "" {
		t.Errorf("finalizer = %q: the reconciler manages its own, as in controller-runtime", c.GetFinalizer())
	}
}
