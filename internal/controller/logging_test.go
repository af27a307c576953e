package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// lines is a logger that keeps what it logs, one string per line.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) logger(verbosity int) logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.all = append(l.all, args)
	}, funcr.Options{Verbosity: verbosity})
}

func (l *lines) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.all {
		if strings.Contains(line, sub) {
			n++
		}
	}
	return n
}

func TestAnUnreachableSidecarIsLoggedOncePerChangeOfState(t *testing.T) {
	t.Parallel()
	// The sidecar fails every call with Unavailable while down is set.
	var down atomic.Bool
	sc := &fakesidecar.Fake{OnReconcile: func(context.Context, *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
		if down.Load() {
			return nil, status.Error(codes.Unavailable, "connection refused")
		}
		return &polyopv1alpha1.ReconcileResponse{}, nil
	}}
	r, _, _ := newFlow(t, "", sc, ownerMap())
	var got lines
	newLog := logConstructor(got.logger(0), "maps", configMapGVK)
	reconcileOnce := func() error {
		log := newLog(&req)
		_, err := r.Reconcile(logr.NewContext(context.Background(), log), req)
		if err != nil {
			// What controller-runtime does with the error.
			log.Error(err, reconcilerErrorMessage)
		}
		return err
	}

	for round := range 2 {
		down.Store(true)
		for range 5 {
			if err := reconcileOnce(); err == nil || !strings.Contains(err.Error(), "Reconcile call to the sidecar at fake") {
				t.Fatalf("Reconcile = %v, want the call's error", err)
			}
		}
		down.Store(false)
		for range 3 {
			if err := reconcileOnce(); err != nil {
				t.Fatal(err)
			}
		}
		if n := got.count("sidecar unreachable"); n != round+1 {
			t.Errorf("after %d outages, %d lines say the sidecar is unreachable", round+1, n)
		}
		if n := got.count("sidecar reachable again"); n != round+1 {
			t.Errorf("after %d outages, %d lines say the sidecar is reachable again", round+1, n)
		}
	}
	if n := got.count(reconcilerErrorMessage); n != 0 {
		t.Errorf("%d %q lines for an unreachable sidecar, want none:\n%s", n, reconcilerErrorMessage, strings.Join(got.all, "\n"))
	}
	if n := got.count(`"ConfigMap"={"name"="o" "namespace"="ns"}`); n != 4 {
		t.Errorf("%d lines name the object, want every state change's:\n%s", n, strings.Join(got.all, "\n"))
	}
}

func TestReconcilerErrorsOtherThanUnreachableAreLoggedAsErrors(t *testing.T) {
	t.Parallel()
	var got lines
	log := logConstructor(got.logger(1), "maps", configMapGVK)(&reconcile.Request{})
	log.Error(errors.New("the sidecar reported: boom"), reconcilerErrorMessage)
	log.Error(&unreachableError{errors.New("down")}, reconcilerErrorMessage)
	log.Error(fmt.Errorf("wrapped: %w", &unreachableError{errors.New("down")}), "something else")
	want := []string{`"msg"="Reconciler error" "error"="the sidecar reported: boom"`, `"level"=1 "msg"="Reconciler error"`, `"msg"="something else"`}
	if len(got.all) != len(want) {
		t.Fatalf("logged %q, want %d lines", got.all, len(want))
	}
	for i, w := range want {
		if !strings.Contains(got.all[i], w) {
			t.Errorf("line %d = %s, want it to contain %s", i, got.all[i], w)
		}
	}
}
