package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fencing"
	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/sidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Sidecar is what a Reconciler needs of the sidecar connection.
type Sidecar interface {
	Reconcile(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error)
	Finalize(ctx context.Context, req *polyopv1alpha1.FinalizeRequest) (*polyopv1alpha1.FinalizeResponse, error)
	Address() string
}

// Reconciler hands each reconcile of one controller to the sidecar. Build it
// with NewReconciler.
type Reconciler struct {
	// Controller is the controller's validated description.
	Controller description.Controller
	// Client reads the reconciled object and its children (from the cache)
	// and writes status, finalizers and children.
	Client client.Client
	// APIReader reads a child that is no longer desired from the API server,
	// when neither the cache nor its labels tell whether the host applied it.
	// Nil: such a child is never pruned.
	APIReader client.Reader
	// Sidecar carries the Reconcile and Finalize calls.
	Sidecar Sidecar
	// Recorder records the events the sidecar returns.
	Recorder recorder.EventRecorder
	// Children are the kinds the controller owns, resolved. Each must carry
	// the OwnerIndex in the cache Client reads.
	Children []ChildKind
	// MaxObjectSize bounds the status and each desired child the sidecar
	// returns, in bytes: a longer one is refused before it is decoded.
	// Defaults to sidecar.DefaultMaxObjectSize.
	MaxObjectSize int

	limiter *rateLimiter
	state   *sidecarState
	// queue is the controller's, once it started: objects waiting for the
	// sidecar are requeued into it (see settle).
	queue workQueue
	kind  *polyopv1alpha1.GroupVersionKind
	// typeMeta is the reconciled kind's apiVersion and kind, formatted once.
	typeMeta metav1.TypeMeta
	applied  *appliedState
	written  *writtenVersions
	tracer   trace.Tracer
	// answered holds the inputs hash of each object's last successful
	// answer, for a controller that declares SkipUnchangedInputs.
	answered *answeredInputs
	// statuses holds the host's last status write of each object.
	statuses *writtenStatuses

	// keepManagedFields keeps managedFields in what a write returns.
	keepManagedFields bool
	// maxConcurrentChildWrites bounds the child writes of one reconcile in
	// flight at once.
	maxConcurrentChildWrites int
	// childLabels are the extra labels of an owner's children (see
	// ReconcilerOptions.ChildLabels); nil for none.
	childLabels func(owner client.Object) map[string]string
	// progress gives each call its cache versions; nil for none.
	progress CacheProgress
	// fence tells the replica's term; nil when the replica writes without
	// a lease.
	fence fencing.Fence
}

// ReconcilerOptions configure a Reconciler beyond the controller, the client
// and the sidecar every one needs.
type ReconcilerOptions struct {
	// APIReader reads a child that is no longer desired from the API server,
	// when neither the cache nor its labels tell whether the host applied it.
	// Defaults to nil: such a child is never pruned.
	APIReader client.Reader
	// Recorder records the events the sidecar returns and the host's own
	// warnings. Defaults to one that drops them.
	Recorder recorder.EventRecorder
	// Children are the kinds the controller owns, resolved. Each must carry
	// the OwnerIndex in the cache the client reads. Defaults to none.
	Children []ChildKind
	// MaxObjectSize bounds the status and each desired child the sidecar
	// returns, in bytes. Defaults to sidecar.DefaultMaxObjectSize.
	MaxObjectSize int
	// SidecarDownMaxBackoff caps the backoff of every key while the sidecar
	// is unreachable. Defaults to zero: controller-runtime's uncapped
	// exponential backoff.
	SidecarDownMaxBackoff time.Duration
	// KeepManagedFields keeps managedFields in the objects read back from
	// the Reconciler's own writes, as the cache keeps them. Defaults to
	// false.
	KeepManagedFields bool
	// TracerProvider makes the spans of each reconcile and of the host's
	// writes. Defaults to the global tracer provider.
	TracerProvider trace.TracerProvider
	// CacheProgress, when set, gives each Reconcile and Finalize call the
	// cache versions it must read at or after (see CacheProgress). Defaults
	// to nil: calls carry none.
	CacheProgress CacheProgress
	// MaxConcurrentChildWrites bounds how many child applies (or deletes of
	// pruned children) of one reconcile are in flight at once; 1 writes them
	// one after the other. Defaults to DefaultMaxConcurrentChildWrites (4).
	MaxConcurrentChildWrites int
	// ChildLabels returns the labels the host sets on every child of owner
	// it applies, beside ControllerLabel: with sharding on, the owner's shard
	// label, so that the child informers of the replica that owns the owner
	// see its children. Defaults to nil: none.
	ChildLabels func(owner client.Object) map[string]string
	// Fence tells the term of the lease the replica reconciles under (the
	// leader election's, or its shard Lease): a reconcile begins only while
	// it is held, each write is made only while the term it began under is
	// still held, and the answer of a call that outlived that term is
	// discarded. Defaults to nil: the replica holds no lease (one replica,
	// no leader election).
	Fence fencing.Fence

	// state is whether the sidecar is down, shared by every controller of a
	// host (Setup). Defaults to the Reconciler's own.
	state *sidecarState
}

// NewReconciler returns the Reconciler of controller c, which reads and
// writes through cl and calls sc.
func NewReconciler(c description.Controller, cl client.Client, sc Sidecar, opts ReconcilerOptions) *Reconciler {
	if opts.state == nil {
		opts.state = &sidecarState{}
	}
	if opts.Recorder == nil {
		// Its nil channel drops every event.
		opts.Recorder = &events.FakeRecorder{}
	}
	if opts.MaxObjectSize <= 0 {
		opts.MaxObjectSize = sidecar.DefaultMaxObjectSize
	}
	if opts.MaxConcurrentChildWrites <= 0 {
		opts.MaxConcurrentChildWrites = DefaultMaxConcurrentChildWrites
	}
	if opts.Fence != nil {
		opts.Recorder = fencedRecorder{EventRecorder: opts.Recorder, fence: opts.Fence}
	}
	return &Reconciler{
		Controller:    c,
		Client:        cl,
		APIReader:     opts.APIReader,
		Sidecar:       sc,
		Recorder:      opts.Recorder,
		Children:      opts.Children,
		MaxObjectSize: opts.MaxObjectSize,

		limiter: newRateLimiter(opts.state, opts.SidecarDownMaxBackoff),
		state:   opts.state,
		kind:    &polyopv1alpha1.GroupVersionKind{Group: c.GVK.Group, Version: c.GVK.Version, Kind: c.GVK.Kind},
		typeMeta: func() (tm metav1.TypeMeta) {
			tm.SetGroupVersionKind(c.GVK)
			return tm
		}(),
		applied: newAppliedState(),
		written: newWrittenVersions(),
		tracer:  newTracer(opts.TracerProvider),

		answered: newAnsweredInputs(),
		statuses: newWrittenStatuses(),

		keepManagedFields: opts.KeepManagedFields,
		progress:          opts.CacheProgress,

		maxConcurrentChildWrites: opts.MaxConcurrentChildWrites,
		childLabels:              opts.ChildLabels,
		fence:                    opts.Fence,
	}
}

var _ reconcile.Reconciler = &Reconciler{}

// staleRetryDelay is how soon an object is reconciled again after a write
// that lost a race with a newer version of it (a conflict). Such a race is not
// a failure: it does not grow the object's backoff or its retry count, which
// the sidecar sees; the newer version's own event usually comes first anyway.
const staleRetryDelay = 100 * time.Millisecond

// Reconcile implements reconcile.Reconciler. It runs in a span of its own
// (see startReconcile), the parent of the sidecar call's and of the host's
// writes.
//
// A call that could not be made because the sidecar is unreachable, or
// still runs the object's last call, is no failure of the object: it waits
// for the sidecar (see settle).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcileInSpan(ctx, req)
	return r.settle(ctx, req, res, err)
}

// reconcileInSpan is one reconcile, in its span.
func (r *Reconciler) reconcileInSpan(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	ctx, span := r.startReconcile(ctx, spanReconcile, req)
	defer func() { endReconcile(span, res, err) }()
	return r.reconcile(ctx, req)
}

// reconcile is one reconcile, in its span.
func (r *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	defer func() { r.scheduleRetry(req, err) }()
	log := logf.FromContext(ctx)
	ctx, held := r.beginTerm(ctx)
	if !held {
		log.V(1).Info("not reconciling: the replica does not hold its lease", "retryAfter", fenceRetry.String())
		return reconcile.Result{RequeueAfter: fenceRetry}, nil
	}

	obj := &object.Object{TypeMeta: r.typeMeta}
	exists := true
	if err := r.get(ctx, req.NamespacedName, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("reading %s %s from the cache: %w", r.Controller.GVK.Kind, req.NamespacedName, err)
		}
		exists = false
		r.applied.forget(req.NamespacedName)
		r.written.forget(req.NamespacedName)
		r.answered.forget(req.NamespacedName)
		r.statuses.forget(req.NamespacedName)
	} else if err := r.awaitOwnWrite(ctx, req, obj); err != nil {
		return reconcile.Result{}, err
	}

	if exists && r.Controller.Finalizer != "" {
		if !obj.GetDeletionTimestamp().IsZero() {
			return r.finalize(ctx, req, obj)
		}
		if !controllerutil.ContainsFinalizer(obj, r.Controller.Finalizer) {
			if err := r.patchFinalizers(ctx, obj, controllerutil.AddFinalizer, spanAddFinalizer); err != nil {
				if fencing.IsLapsed(err) {
					return discardLapsed(log, "adding the finalizer", err)
				}
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					log.V(1).Info("adding the finalizer raced with a newer version of the object; requeueing", "error", err.Error())
					return reconcile.Result{RequeueAfter: staleRetryDelay}, nil
				}
				return reconcile.Result{}, err
			}
			r.written.record(req.NamespacedName, obj.GetResourceVersion())
			log.V(1).Info("added the finalizer", "finalizer", r.Controller.Finalizer)
		}
	}

	// inputs is the hash of the call's inputs when the controller skips
	// unchanged ones; recorded only when the answer is a success written
	// whole.
	var inputs uint64
	var hashed bool
	call := &polyopv1alpha1.ReconcileRequest{
		Controller: r.Controller.Name,
		Kind:       r.kind,
		Key:        &polyopv1alpha1.ObjectKey{Namespace: req.Namespace, Name: req.Name},
	}
	call.Retries = int32(r.limiter.NumRequeues(req))
	var observed []*object.Object
	if exists {
		raw, err := obj.MarshalJSON()
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("encoding %s %s: %w", r.Controller.GVK.Kind, req.NamespacedName, err)
		}
		call.Object = raw
		if observed, err = r.observedChildren(ctx, obj); err != nil {
			return reconcile.Result{}, err
		}
		sent := r.sent(observed)
		if call.ObservedChildren, err = encodeChildren(sent); err != nil {
			return reconcile.Result{}, err
		}
		if r.Controller.SkipUnchangedInputs && obj.GetDeletionTimestamp().IsZero() {
			var skip bool
			if inputs, hashed, skip = r.unchanged(ctx, req, call.Retries, obj, sent, observed); skip {
				return reconcile.Result{}, nil
			}
		}
	}

	call.CacheVersions = r.cacheVersions(ctx)
	resp, err := r.Sidecar.Reconcile(ctx, call)
	if err == nil {
		// The sidecar client bounds what it reads; another Sidecar may not.
		err = sidecar.CheckSizes(resp, r.maxObjectSize())
	}
	var tooLarge *sidecar.TooLargeError
	if err != nil && !errors.As(err, &tooLarge) {
		return reconcile.Result{}, r.callFailed(log, "Reconcile", err)
	}
	r.callAnswered(log)
	if err := r.termLapsed(ctx); err != nil {
		return discardLapsed(log, "the Reconcile call", err)
	}

	result, resultErr := decide(resp)
	if !exists {
		if len(resp.GetStatus()) > 0 || len(resp.GetEvents()) > 0 || len(resp.GetDesiredChildren()) > 0 || tooLarge != nil {
			log.V(1).Info("ignoring the status, events and children the sidecar returned for an object that no longer exists")
		}
		return result, resultErr
	}

	// Everything the sidecar returned is checked before anything is written,
	// and its size before its content.
	if tooLarge != nil {
		return reconcile.Result{}, errors.Join(r.refuseTooLarge(obj, err), resultErr)
	}
	if err := checkFailure(resp.GetError()); err != nil {
		return reconcile.Result{}, r.refuseAnswer(obj, ReasonInvalidFailure, err)
	}
	status := resp.GetStatus()
	if len(status) > 0 {
		if err := checkStatus(status); err != nil {
			return reconcile.Result{}, errors.Join(r.refuseAnswer(obj, ReasonInvalidStatus, err), resultErr)
		}
	}
	var extraLabels map[string]string
	if r.childLabels != nil {
		extraLabels = r.childLabels(obj)
	}
	desired, err := validateLabelledChildren(resp.GetDesiredChildren(), obj, r.Controller.Name, r.Children, extraLabels)
	if err != nil {
		return reconcile.Result{}, errors.Join(r.refuseAnswer(obj, ReasonInvalidDesiredChildren, err), resultErr)
	}

	var childErr error
	switch {
	case len(r.Children) == 0:
	case !obj.GetDeletionTimestamp().IsZero():
		// The garbage collector is about to take the children with the owner.
		log.V(1).Info("the object is being deleted; leaving its children as they are")
	default:
		// A partial answer, or one that reports an error, never deletes a
		// child.
		prune := resp.GetChildrenComplete() && resultErr == nil
		res := r.applyChildren(ctx, obj, desired, observed, prune)
		if err := r.termLapsed(ctx); err != nil {
			return discardLapsed(log, "applying the children", err)
		}
		for _, p := range res.problems {
			r.recordWarning(obj, p.reason, p.err.Error())
		}
		childErr = res.err()
		if res.applied > 0 || res.pruned > 0 {
			log.V(1).Info("applied children", "applied", res.applied, "unchanged", res.unchanged, "replaced", res.replaced, "pruned", res.pruned)
		}
	}

	if len(status) > 0 {
		written, err := r.writeStatus(ctx, obj, status)
		switch {
		case fencing.IsLapsed(err):
			return discardLapsed(log, "writing the status", err)
		case err != nil && apierrors.IsConflict(err):
			log.V(1).Info("status write conflicted with a newer version of the object; requeueing", "error", err.Error())
			if resultErr == nil && childErr == nil {
				return reconcile.Result{RequeueAfter: staleRetryDelay}, nil
			}
		case err != nil:
			return reconcile.Result{}, errors.Join(err, childErr, resultErr)
		case written:
			r.written.record(req.NamespacedName, obj.GetResourceVersion())
			log.V(1).Info("wrote status")
		}
	}
	r.recordEvents(obj, resp.GetEvents())
	r.recordFailure(obj, ReasonReconcileFailed, resp.GetError())
	if childErr != nil {
		return reconcile.Result{}, errors.Join(childErr, resultErr)
	}
	if hashed && resultErr == nil && result.IsZero() {
		r.answered.record(req.NamespacedName, inputs)
	}
	return result, resultErr
}

// unchanged tells whether a Reconcile call with the inputs obj and sent can
// be skipped (skip): they hash as those of the object's last successful
// answer, the call is no retry, and the observed children the sidecar is not
// sent are exactly as the host last applied them (childrenAsLeft), so that a
// call could neither answer differently nor make the host write anything. It returns the inputs hash and whether it
// has one, and otherwise forgets the last one, so that a reconcile which does
// not end in success is never skipped after.
func (r *Reconciler) unchanged(ctx context.Context, req reconcile.Request, retries int32, obj *object.Object, sent, observed []*object.Object) (h uint64, hashed, skip bool) {
	h, err := inputsHash(obj, sent)
	if err != nil {
		r.answered.forget(req.NamespacedName)
		logf.FromContext(ctx).V(1).Info("could not hash the inputs; calling the sidecar", "error", err.Error())
		return 0, false, false
	}
	if retries == 0 && r.answered.holds(req.NamespacedName, h) && r.childrenAsLeft(req.NamespacedName, obj, observed) {
		callsSkipped.WithLabelValues(r.Controller.Name).Inc()
		// The reconcile's logger names the controller and the object.
		logf.FromContext(ctx).V(1).Info("skipping the Reconcile call: the object and its observed children are those of the last successful answer")
		return h, true, true
	}
	r.answered.forget(req.NamespacedName)
	return h, true, false
}

// get reads the reconciled object key from the cache into obj.
func (r *Reconciler) get(ctx context.Context, key types.NamespacedName, obj *object.Object) error {
	err := r.Client.Get(ctx, key, obj)
	// A reader may leave the kind out (the cache sets it, the API machinery's
	// decoders clear it); the rest of the reconcile needs it.
	obj.TypeMeta = r.typeMeta
	return err
}

// sent are the observed children of the kinds declared with send_observed.
func (r *Reconciler) sent(observed []*object.Object) []*object.Object {
	send := map[schema.GroupVersionKind]bool{}
	for _, k := range r.Children {
		send[k.GVK] = k.SendObserved
	}
	var out []*object.Object
	for _, c := range observed {
		if send[c.GroupVersionKind()] {
			out = append(out, c)
		}
	}
	return out
}

// encodeChildren encodes children for ReconcileRequest.observed_children.
func encodeChildren(children []*object.Object) ([][]byte, error) {
	var out [][]byte
	for _, c := range children {
		raw, err := c.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encoding child %s: %w", idOf(c), err)
		}
		out = append(out, raw)
	}
	return out, nil
}

// decide maps the sidecar's decision onto controller-runtime's. A Failure is
// the reconcile's error (a *sidecarFailure; terminal when it says so) and
// requeue_after beside it is ignored, as controller-runtime ignores a
// Result beside an error: Failure.retry_after says when to retry. A broken
// Failure (see checkFailure) is an error that is retried with backoff.
func decide(resp *polyopv1alpha1.ReconcileResponse) (reconcile.Result, error) {
	if e := resp.GetError(); e != nil {
		if err := checkFailure(e); err != nil {
			return reconcile.Result{}, err
		}
		err := &sidecarFailure{message: e.GetMessage()}
		if e.GetTerminal() {
			return reconcile.Result{}, reconcile.TerminalError(err)
		}
		if d := e.GetRetryAfter(); d != nil && d.AsDuration() > 0 {
			err.retryAfter = d.AsDuration()
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
	return reconcile.Result{}, nil
}

// writeStatus replaces obj's status with status (its JSON, as the sidecar
// sent it), through the status subresource, unless it is unchanged, or
// writing it would only repeat the host's own last write (see
// statusAsWritten). The
// patch sets the whole status and carries obj's resourceVersion, so that a
// status computed from a stale object is refused with a conflict. obj is
// updated to what the API server stored.
func (r *Reconciler) writeStatus(ctx context.Context, obj *object.Object, status []byte) (bool, error) {
	current, _ := obj.Field("status")
	cmp := compareStatus(current, status)
	if cmp.same {
		r.statusSettled(obj)
		return false, nil
	}
	if r.statusAsWritten(obj, cmp) {
		return false, nil
	}
	ctx, span := r.startWrite(ctx, spanWriteStatus)
	patch := statusPatch(obj.GetResourceVersion(), status)
	err := r.patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch), true)
	endSpan(span, err)
	if err != nil {
		if apierrors.IsConflict(err) || fencing.IsLapsed(err) {
			return false, err
		}
		return false, fmt.Errorf("writing the status of %s %s/%s: %w", obj.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	r.rememberStatus(obj, cmp.sent, cmp.sentOK)
	return true, nil
}

// patch writes patch to obj, or to its status subresource, and updates obj to
// what the API server stored, as the cache would hold it (without
// managedFields, unless they are kept).
func (r *Reconciler) patch(ctx context.Context, obj *object.Object, patch client.Patch, status bool) error {
	gvk := obj.GroupVersionKind()
	err := r.write(ctx, func(ctx context.Context) error {
		if status {
			return r.Client.Status().Patch(ctx, obj, patch)
		}
		return r.Client.Patch(ctx, obj, patch)
	})
	// Decoding the answer clears the kind.
	obj.SetGroupVersionKind(gvk)
	if !r.keepManagedFields {
		obj.ManagedFields = nil
	}
	return err
}

func (r *Reconciler) recordEvents(obj client.Object, events []*polyopv1alpha1.Event) {
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

// recordWarning records a Warning event on obj about something the host
// could not do.
func (r *Reconciler) recordWarning(obj client.Object, reason, message string) {
	const limit = 1000
	if len(message) > limit {
		message = message[:limit] + "…"
	}
	r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, reason, "%s", message)
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
