package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	polyopv1alpha1 "github.com/polyop/polyop/gen/go/polyop/v1alpha1"
	"github.com/polyop/polyop/internal/sidecar"
)

// Sidecar is what a Reconciler needs of the sidecar connection.
type Sidecar interface {
	Reconcile(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error)
	Address() string
}

// Reconciler hands each reconcile of one controller to the sidecar.
type Reconciler struct {
	// Controller is the controller's validated description.
	Controller sidecar.Controller
	// Client reads the reconciled object (from the cache) and writes its status.
	Client client.Client
	// Sidecar carries the Reconcile call.
	Sidecar Sidecar
	// Recorder records the events the sidecar returns.
	Recorder recorder.EventRecorder

	limiter *rateLimiter
	state   *sidecarState
	kind    *polyopv1alpha1.GroupVersionKind
}

var _ reconcile.Reconciler = &Reconciler{}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx)

	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.Controller.GVK)
	exists := true
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("reading %s %s from the cache: %w", r.Controller.GVK.Kind, req.NamespacedName, err)
		}
		exists = false
	}

	call := &polyopv1alpha1.ReconcileRequest{
		Controller: r.Controller.Name,
		Kind:       r.kind,
		Key:        &polyopv1alpha1.ObjectKey{Namespace: req.Namespace, Name: req.Name},
	}
	if r.limiter != nil {
		call.Retries = int32(r.limiter.NumRequeues(req))
	}
	if exists {
		raw, err := obj.MarshalJSON()
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("encoding %s %s: %w", r.Controller.GVK.Kind, req.NamespacedName, err)
		}
		call.Object = raw
	}

	resp, err := r.Sidecar.Reconcile(ctx, call)
	if err != nil {
		if r.state != nil && sidecar.IsUnavailable(err) {
			r.state.down.Store(true)
		}
		return reconcile.Result{}, fmt.Errorf("Reconcile call to the sidecar at %s: %w", r.Sidecar.Address(), err)
	}
	if r.state != nil {
		r.state.down.Store(false)
	}

	result, resultErr := decide(resp)
	if !exists {
		if len(resp.GetStatus()) > 0 || len(resp.GetEvents()) > 0 {
			log.V(1).Info("ignoring the status and events the sidecar returned for an object that no longer exists")
		}
		return result, resultErr
	}

	if len(resp.GetStatus()) > 0 {
		written, err := r.writeStatus(ctx, obj, resp.GetStatus())
		switch {
		case apierrors.IsConflict(err):
			log.V(1).Info("status write conflicted with a newer version of the object; requeueing", "error", err.Error())
			if resultErr == nil {
				return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // rate-limited requeue, as the sidecar's status is stale
			}
		case err != nil:
			return reconcile.Result{}, errors.Join(err, resultErr)
		case written:
			log.V(1).Info("wrote status")
		}
	}
	r.recordEvents(obj, resp.GetEvents())
	return result, resultErr
}

// decide maps the sidecar's decision onto controller-runtime's.
func decide(resp *polyopv1alpha1.ReconcileResponse) (reconcile.Result, error) {
	if e := resp.GetError(); e != nil {
		err := fmt.Errorf("the sidecar reported: %s", e.GetMessage())
		if e.GetTerminal() {
			return reconcile.Result{}, reconcile.TerminalError(err)
		}
		return reconcile.Result{}, err
	}
	if d := resp.GetRequeueAfter(); d != nil {
		if err := d.CheckValid(); err != nil {
			return reconcile.Result{}, fmt.Errorf("the sidecar returned an invalid requeue_after: %w", err)
		}
		if d.AsDuration() > 0 {
			return reconcile.Result{RequeueAfter: d.AsDuration()}, nil
		}
	}
	if resp.GetRequeue() {
		return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // the protocol's rate-limited requeue
	}
	return reconcile.Result{}, nil
}

// writeStatus replaces obj's status with the JSON object raw, through the
// status subresource, unless it is unchanged. It patches with optimistic
// concurrency on obj's resourceVersion, so a status computed from a stale
// object is refused with a conflict.
func (r *Reconciler) writeStatus(ctx context.Context, obj *unstructured.Unstructured, raw []byte) (bool, error) {
	var status any
	if err := utiljson.Unmarshal(raw, &status); err != nil {
		return false, fmt.Errorf("the sidecar returned a status that is not valid JSON: %w (%q)", err, truncate(raw))
	}
	statusMap, ok := status.(map[string]any)
	if !ok {
		return false, fmt.Errorf("the sidecar returned a status that is not a JSON object: %q", truncate(raw))
	}
	current, _ := obj.Object["status"].(map[string]any)
	if reflect.DeepEqual(current, statusMap) || len(current) == 0 && len(statusMap) == 0 {
		// Unchanged, or empty both times: an SDK whose status type has no
		// omitempty sends {} for an object that has no status yet.
		return false, nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopy(), client.MergeFromWithOptimisticLock{})
	obj.Object["status"] = statusMap
	if err := r.Client.Status().Patch(ctx, obj, patch); err != nil {
		if apierrors.IsConflict(err) {
			return false, err
		}
		return false, fmt.Errorf("writing the status of %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return true, nil
}

func (r *Reconciler) recordEvents(obj *unstructured.Unstructured, events []*polyopv1alpha1.Event) {
	if r.Recorder == nil {
		return
	}
	for _, e := range events {
		eventType := corev1.EventTypeNormal
		if e.GetType() == polyopv1alpha1.EventType_EVENT_TYPE_WARNING {
			eventType = corev1.EventTypeWarning
		}
		action := e.GetAction()
		if action == "" {
			action = e.GetReason()
		}
		r.Recorder.Eventf(obj, nil, eventType, e.GetReason(), action, "%s", e.GetMessage())
	}
}

// truncate shortens a malformed payload for an error message.
func truncate(raw []byte) string {
	const limit = 200
	raw = bytes.TrimSpace(raw)
	if len(raw) > limit {
		return string(raw[:limit]) + "…"
	}
	return string(raw)
}
