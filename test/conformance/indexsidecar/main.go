// Command indexsidecar is the conformance test's operator, a kubebuilder
// project in miniature: a Crew controller that keeps spec.size Jobs, which it
// creates with controller references (Owns) and lists through a custom field
// index with a Go func (IndexField, as kubebuilder's CronJob tutorial does),
// and a defaulting and a validating webhook for Crew. The controller and the
// webhooks (internal/controller, internal/webhook/v1) are written for
// controller-runtime alone and import nothing of polyop.
//
// With --standalone it runs them in a controller-runtime manager, as
// kubebuilder's main.go does (manager.go); otherwise it serves them as a
// polyop sidecar behind the host (sidecar.go). Those two files are the whole
// difference, and docs/migrating.md quotes them: keep them in step.
//
// Usage:
//
//	indexsidecar --address unix:///path/to/sidecar.sock
//	indexsidecar --standalone --kubeconfig k.yaml --namespace ns --webhook-port 9443 --webhook-cert-dir dir
package main

import (
	"flag"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/polyop/polyop/sdk/go/sidecar"
)

// Regenerate the deep copy functions, the CRD and the webhook configurations
// after changing api/v1 or the webhook markers.
//go:generate ../../../bin/controller-gen object:headerFile=../../../hack/boilerplate.go.txt paths=./api/...
//go:generate ../../../bin/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd
//go:generate ../../../bin/controller-gen webhook paths=./internal/webhook/... output:webhook:artifacts:config=config/webhook

func main() {
	address := flag.String("address", sidecar.DefaultAddress, "Where to serve the sidecar API.")
	standalone := flag.Bool("standalone", false, "Run in a controller-runtime manager against --kubeconfig instead.")
	var mgrFlags managerFlags
	mgrFlags.bind(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	ctx := ctrl.SetupSignalHandler()

	var err error
	if *standalone {
		err = runManager(ctx, mgrFlags)
	} else {
		err = serveSidecar(ctx, *address)
	}
	if err != nil {
		ctrl.Log.Error(err, "Stopped")
		os.Exit(1)
	}
}
