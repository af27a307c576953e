// Command indexsidecar is a sidecar built with the Go SDK for the conformance
// test of custom field indexes: an ordinary controller-runtime reconciler,
// written as kubebuilder's CronJob tutorial writes its controller, counts the
// Jobs a parent (a ConfigMap labelled conformance.polyop.dev/jobs-parent)
// controls, through a field index on the Job's controller with a Go func, and
// writes the count in the parent's conformance.polyop.dev/jobs annotation.
// With --standalone it runs the same reconciler in a controller-runtime
// manager instead.
//
// Usage:
//
//	indexsidecar --address unix:///path/to/sidecar.sock
//	indexsidecar --standalone --kubeconfig k.yaml --namespace ns
package main

import (
	"context"
	"flag"
	"os"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/polyop/polyop/sdk/go/sidecar"
)

const (
	// ParentLabel selects the parents.
	ParentLabel = "conformance.polyop.dev/jobs-parent"
	// CountAnnotation holds the number of Jobs a parent controls.
	CountAnnotation = "conformance.polyop.dev/jobs"
	// jobOwnerKey is the index, named as in kubebuilder's CronJob tutorial.
	jobOwnerKey = ".metadata.controller"
)

// JobCounter counts the Jobs each parent controls.
type JobCounter struct {
	client.Client
}

// Reconcile lists the parent's Jobs by the index and records their number.
func (r *JobCounter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var parent corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &parent); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var jobs batchv1.JobList
	if err := r.List(ctx, &jobs, client.InNamespace(req.Namespace), client.MatchingFields{jobOwnerKey: req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	count := strconv.Itoa(len(jobs.Items))
	if parent.Annotations[CountAnnotation] == count {
		return ctrl.Result{}, nil
	}
	if parent.Annotations == nil {
		parent.Annotations = map[string]string{}
	}
	parent.Annotations[CountAnnotation] = count
	return ctrl.Result{}, r.Update(ctx, &parent)
}

// indexJobs indexes Jobs by the name of the parent that controls them, as
// the CronJob tutorial indexes them by their CronJob.
func indexJobs(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &batchv1.Job{}, jobOwnerKey, func(rawObj client.Object) []string {
		job := rawObj.(*batchv1.Job)
		owner := metav1.GetControllerOf(job)
		if owner == nil || owner.APIVersion != "v1" || owner.Kind != "ConfigMap" {
			return nil
		}
		return []string{owner.Name}
	})
}

// SetupWithManager runs the reconciler in a controller-runtime manager.
func (r *JobCounter) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.Client = mgr.GetClient()
	if err := indexJobs(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	parents, err := predicate.LabelSelectorPredicate(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: ParentLabel, Operator: metav1.LabelSelectorOpExists},
	}})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}, builder.WithPredicates(parents)).
		Owns(&batchv1.Job{}).
		Named("jobcounter").
		Complete(r)
}

// SetupWithServer runs the same reconciler in a polyop sidecar.
func (r *JobCounter) SetupWithServer(ctx context.Context, srv *sidecar.Server) error {
	r.Client = srv.GetClient()
	if err := indexJobs(ctx, srv.GetFieldIndexer()); err != nil {
		return err
	}
	return sidecar.NewControllerManagedBy[*corev1.ConfigMap](srv).
		WithLabelSelector(ParentLabel).
		Owns(&batchv1.Job{}).
		Named("jobcounter").
		CompleteRequests(r)
}

func main() {
	address := flag.String("address", sidecar.DefaultAddress, "Where to serve the sidecar API.")
	standalone := flag.Bool("standalone", false, "Run in a controller-runtime manager against --kubeconfig instead.")
	namespace := flag.String("namespace", "", "With --standalone, watch only this namespace.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	ctx := ctrl.SetupSignalHandler()

	var err error
	if *standalone {
		var mgr ctrl.Manager
		mgr, err = ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
			Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}},
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
		})
		if err == nil {
			err = (&JobCounter{}).SetupWithManager(ctx, mgr)
		}
		if err == nil {
			err = mgr.Start(ctx)
		}
	} else {
		var srv *sidecar.Server
		srv, err = sidecar.New(sidecar.Options{Name: "index-conformance"})
		if err == nil {
			err = (&JobCounter{}).SetupWithServer(ctx, srv)
		}
		if err == nil {
			err = srv.Serve(ctx, *address)
		}
	}
	if err != nil {
		ctrl.Log.Error(err, "Stopped")
		os.Exit(1)
	}
}
