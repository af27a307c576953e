package sidecar

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestAReconcileErrorIsLoggedAtDebugLevelOnly(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"a transient error": errors.New("the backend is down"),
		"a terminal error":  reconcile.TerminalError(errors.New("never")),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var lines []string
			log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 1})
			resp := decision(log, Result{}, false, err)
			if resp.GetError() == nil {
				t.Fatal("the error is not in the response")
			}
			// The host logs the error it receives; the sidecar only at debug level.
			if len(lines) != 1 || !strings.Contains(lines[0], `"level"=1 "msg"="Reconciler error"`) {
				t.Errorf("logged %q, want one debug line", lines)
			}
		})
	}
}
