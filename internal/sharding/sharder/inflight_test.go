package sharder

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/polyop/polyop/internal/testenv"
)

var key = types.NamespacedName{Namespace: "ns", Name: "object"}

func TestADrainWaitsForTheReconcilesInFlightAndRefusesNewOnesUntilDone(t *testing.T) {
	f := NewInFlight()
	for range 2 { // two controllers of the replica reconcile it
		if !f.Begin(key) {
			t.Fatal("Begin refused a key that is not draining")
		}
	}
	drained := make(chan func())
	go func() {
		done, err := f.Drain(context.Background(), key)
		if err != nil {
			t.Error(err)
		}
		drained <- done
	}()
	// The drain holds the key as soon as it starts: Begin refuses it then.
	testenv.Eventually(t, time.Minute, "Begin refusing the draining key", func() (bool, string) {
		if f.Begin(key) {
			f.End(key)
			return false, "Begin accepted it"
		}
		return true, ""
	})
	f.End(key)
	select {
	case <-drained:
		t.Fatal("the drain ended with a reconcile still in flight")
	default:
	}
	if got := f.Running(key); got != 1 {
		t.Fatalf("%d reconciles in flight, want 1", got)
	}
	f.End(key)
	done := <-drained
	if f.Begin(key) {
		t.Fatal("Begin accepted a key whose drain has not called done")
	}
	done()
	if !f.Begin(key) {
		t.Fatal("Begin refused a key whose drain is done")
	}
	f.End(key)
}

func TestADrainThatGivesUpLetsReconcilesStartAgain(t *testing.T) {
	f := NewInFlight()
	f.Begin(key)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Drain(ctx, key); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain with a reconcile in flight and an ended context returned %v, want context.Canceled", err)
	}
	f.End(key)
	if !f.Begin(key) {
		t.Fatal("Begin refused a key whose drain gave up")
	}
	f.End(key)
}

func TestDrainsOfOneKeyTakeTurns(t *testing.T) {
	f := NewInFlight()
	done1, err := f.Drain(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan func())
	go func() {
		done, err := f.Drain(context.Background(), key)
		if err != nil {
			t.Error(err)
		}
		second <- done
	}()
	done1()
	done2 := <-second
	if f.Begin(key) {
		t.Fatal("Begin accepted a key the second drain holds")
	}
	done2()
	if !f.Begin(key) {
		t.Fatal("Begin refused a key after both drains")
	}
}
