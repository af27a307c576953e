// Package controller is the conformance operator's controller, written as a
// kubebuilder project writes one, against controller-runtime alone: it imports
// nothing of polyop. The same package runs in a controller-runtime manager and
// in a polyop sidecar; only the binary's main differs.
package controller

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/polyop/polyop/test/conformance/indexsidecar/api/v1"
)

const (
	// JobOwnerKey is the field index of Jobs by the name of the Crew that
	// controls them, named as in kubebuilder's CronJob tutorial.
	JobOwnerKey = ".metadata.controller"
	// CrewLabel, on a Job, names its Crew.
	CrewLabel = "conformance.polyop.dev/crew"
)

// CrewReconciler keeps spec.size Jobs for each Crew and lists them in its
// status.
type CrewReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// +kubebuilder:rbac:groups=conformance.polyop.dev,resources=crews,verbs=get;list;watch
// +kubebuilder:rbac:groups=conformance.polyop.dev,resources=crews/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create

// Reconcile lists the Crew's Jobs through the field index, creates the ones
// missing, and records the ones listed in the status.
func (r *CrewReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	var crew v1.Crew
	if err := r.Get(ctx, req.NamespacedName, &crew); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	var jobs batchv1.JobList
	if err := r.List(ctx, &jobs, client.InNamespace(req.Namespace), client.MatchingFields{JobOwnerKey: req.Name}); err != nil {
		log.Error(err, "unable to list child Jobs")
		return ctrl.Result{}, err
	}
	var names []string
	for _, job := range jobs.Items {
		names = append(names, job.Name)
	}
	slices.Sort(names)

	size := int32(1)
	if crew.Spec.Size != nil {
		size = *crew.Spec.Size
	}
	for i := range size {
		name := fmt.Sprintf("%s-%d", crew.Name, i)
		if slices.Contains(names, name) {
			continue
		}
		job, err := r.constructJob(&crew, name)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
			log.Error(err, "unable to create Job for Crew", "job", name)
			return ctrl.Result{}, err
		}
		log.V(1).Info("created Job for Crew", "job", name)
	}

	if slices.Equal(crew.Status.Jobs, names) {
		return ctrl.Result{}, nil
	}
	crew.Status.Jobs = names
	if err := r.Status().Update(ctx, &crew); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// constructJob is the Job name of crew, which crew controls.
func (r *CrewReconciler) constructJob(crew *v1.Crew, name string) (*batchv1.Job, error) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: crew.Namespace,
			Name:      name,
			Labels:    map[string]string{CrewLabel: crew.Name},
		},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "work", Image: crew.Spec.Image}},
		}}},
	}
	if err := ctrl.SetControllerReference(crew, job, r.Scheme); err != nil {
		return nil, err
	}
	return job, nil
}

// IndexJobsByCrew indexes Jobs by the name of the Crew that controls them,
// as the CronJob tutorial indexes them by their CronJob.
func IndexJobsByCrew(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &batchv1.Job{}, JobOwnerKey, func(rawObj client.Object) []string {
		job := rawObj.(*batchv1.Job)
		owner := metav1.GetControllerOf(job)
		if owner == nil || owner.APIVersion != v1.GroupVersion.String() || owner.Kind != "Crew" {
			return nil
		}
		return []string{owner.Name}
	})
}

// SetupWithManager sets up the controller with the Manager.
func (r *CrewReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := IndexJobsByCrew(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Crew{}).
		Owns(&batchv1.Job{}).
		Named("crew").
		Complete(r)
}
