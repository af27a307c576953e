// Package trace is the trace mode of testsidecar (testsidecar trace): a
// sidecar written with the Go SDK for the tracing
// end-to-end test: its controller reconciles ConfigMaps, lists the Secrets of
// the ConfigMap's namespace through the host's Cluster service, and desires
// one Secret, "<name>-copy", holding the ConfigMap's data. Tracing is set up
// by the SDK from the OTEL_* environment variables.
package trace

import (
	"context"
	"flag"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	sdkaddress "github.com/polyop/polyop/sdk/go/address"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// Main runs the mode with the command line args, and exits the process
// when it fails.
func Main(args []string) {
	fs := flag.NewFlagSet("testsidecar trace", flag.ExitOnError)
	address := fs.String("address", sdkaddress.Default, "Where to serve the sidecar API.")
	_ = fs.Parse(args)
	ctrl.SetLogger(zap.New(zap.UseDevMode(false)))

	srv, err := sidecar.New(sidecar.Options{Name: "tracesidecar"})
	if err != nil {
		fail(err)
	}
	cl := srv.GetClient()
	err = sidecar.NewControllerManagedBy[*corev1.ConfigMap](srv).
		Named("copier").
		Owns(&corev1.Secret{}).
		Complete(sidecar.ReconcilerFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (sidecar.Result, error) {
			var secrets corev1.SecretList
			if err := cl.List(ctx, &secrets, client.InNamespace(cm.Namespace)); err != nil {
				return sidecar.Result{}, err
			}
			// A span attribute of the user's own, on the handler's span.
			trace.SpanFromContext(ctx).SetAttributes(attribute.Int("copier.secrets", len(secrets.Items)))
			ctrl.LoggerFrom(ctx).Info("Copying the ConfigMap", "secrets", len(secrets.Items))
			copied := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cm.Name + "-copy"}, StringData: cm.Data}
			if err := sidecar.Desire(ctx, copied); err != nil {
				return sidecar.Result{}, err
			}
			sidecar.DesiredComplete(ctx)
			return sidecar.Result{}, nil
		}))
	if err != nil {
		fail(err)
	}
	if err := srv.Serve(ctrl.SetupSignalHandler(), *address); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tracesidecar:", err)
	os.Exit(1)
}
