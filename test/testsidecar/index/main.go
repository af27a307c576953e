// Package index is the index mode of testsidecar (testsidecar index): a
// polyop sidecar on the Go SDK that exists for the
// host's end-to-end tests of declared cache indexes and cached kinds. It
// reconciles Secrets and, for each, lists the ConfigMaps of its namespace
// through two declared indexes, from the host's cache:
//
//   - ".metadata.controller", a field path: the name of a ConfigMap's
//     controller owner, as kubebuilder's CronJob tutorial indexes Jobs;
//   - "parent", a CEL expression: the ConfigMap's data.parent.
//
// It writes what it found into the ConfigMap "<secret>-summary":
// data.byController and data.byParent, the names found, sorted and
// comma-separated, data.source, where the Lists were served from, and
// data.allNamespaces, what a List across every namespace gave. It asks
// to be reconciled again every 200ms, so that the summary follows the
// ConfigMaps without a watch.
//
// With --cel it declares the "parent" index with that CEL expression instead
// (for the test of an expression the host refuses).
package index

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	sdkaddress "github.com/polyop/polyop/sdk/go/address"
	"github.com/polyop/polyop/sdk/go/client"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// Main runs the mode with the command line args, and exits the process
// when it fails.
func Main(args []string) {
	fs := flag.NewFlagSet("testsidecar index", flag.ExitOnError)
	address := fs.String("address", sdkaddress.Default, "Where to serve.")
	parentCEL := fs.String("cel", "has(object.data) && has(object.data.parent) ? [object.data.parent] : []",
		"The CEL expression of the index \"parent\" on ConfigMaps.")
	_ = fs.Parse(args)
	ctrl.SetLogger(zap.New())

	srv, err := sidecar.New(sidecar.Options{Name: "indexsidecar"})
	if err == nil {
		err = setup(srv, *parentCEL)
	}
	if err == nil {
		err = srv.Serve(ctrl.SetupSignalHandler(), *address)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "indexsidecar:", err)
		os.Exit(1)
	}
}

func setup(srv *sidecar.Server, parentCEL string) error {
	if err := srv.Index(&corev1.ConfigMap{}, ".metadata.controller",
		sidecar.FieldPath(".metadata.ownerReferences[?(@.controller==true)].name")); err != nil {
		return err
	}
	if err := srv.Index(&corev1.ConfigMap{}, "parent", sidecar.CEL(parentCEL)); err != nil {
		return err
	}
	if err := srv.CacheKind(&corev1.ConfigMap{}, sidecar.CacheOptions{}); err != nil {
		return err
	}
	return sidecar.NewControllerManagedBy[*corev1.Secret](srv).Complete(&reconciler{c: srv.GetClient()})
}

type reconciler struct{ c ctrlclient.Client }

func (r *reconciler) Reconcile(ctx context.Context, secret *corev1.Secret) (sidecar.Result, error) {
	req := ctrlclient.ObjectKeyFromObject(secret)
	byController, source, err := r.names(ctx, req.Namespace, ctrlclient.MatchingFields{".metadata.controller": req.Name})
	if err != nil {
		return sidecar.Result{}, err
	}
	byParent, _, err := r.names(ctx, req.Namespace, ctrlclient.MatchingFields{"parent": req.Name})
	if err != nil {
		return sidecar.Result{}, err
	}
	summary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name + "-summary"}}
	data := map[string]string{"byController": byController, "byParent": byParent, "source": string(source), "allNamespaces": r.listEverywhere(ctx)}
	err = r.c.Get(ctx, ctrlclient.ObjectKeyFromObject(summary), summary, client.Uncached)
	switch {
	case apierrors.IsNotFound(err):
		summary.Data = data
		err = r.c.Create(ctx, summary)
	case err == nil:
		summary.Data = data
		err = r.c.Update(ctx, summary)
	}
	return sidecar.Result{RequeueAfter: 200 * time.Millisecond}, err
}

// listEverywhere lists ConfigMaps across every namespace, which a host scoped
// by --namespace refuses for a declared cached kind: "refused" and the
// error's message, or how many it listed.
func (r *reconciler) listEverywhere(ctx context.Context) string {
	var list corev1.ConfigMapList
	if err := r.c.List(ctx, &list); err != nil {
		return "refused: " + err.Error()
	}
	return fmt.Sprintf("listed %d", len(list.Items))
}

// names lists the ConfigMaps of namespace that opts select, and says where
// the List was served from.
func (r *reconciler) names(ctx context.Context, namespace string, opts ...ctrlclient.ListOption) (string, client.Source, error) {
	var list corev1.ConfigMapList
	var source client.Source
	opts = append(opts, ctrlclient.InNamespace(namespace), client.RecordSource(&source))
	if err := r.c.List(ctx, &list, opts...); err != nil {
		return "", source, err
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ","), source, nil
}
