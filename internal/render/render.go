package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/polyop/polyop/internal/controller"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/sidecarprocess"
	"github.com/polyop/polyop/internal/version"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// RenderOptions are polyop render's: what Render reads, the sidecar it calls
// and how it prints the answer.
type RenderOptions struct {
	// ObjectFile holds the object to reconcile or admit. Required.
	ObjectFile string
	// ObservedFile holds the children the host would send as observed.
	// Defaults to "": none.
	ObservedFile string
	// ClusterObjectsFile holds other objects the sidecar may read through
	// the Cluster service. Defaults to "": none.
	ClusterObjectsFile string
	// OldObjectFile holds the object as it was, for --admission update.
	// Defaults to "".
	OldObjectFile string
	// Controller names the controller to call. Defaults to "": the one
	// that reconciles the object's kind.
	Controller string
	// Admission is the operation to admit the object for first: create,
	// update or delete. Defaults to "": no admission call.
	Admission string
	// SidecarAddress is a running sidecar's address. Defaults to "": the
	// sidecar command is started.
	SidecarAddress string
	// Command is the sidecar command, started with --address appended.
	Command []string
	// Output is yaml or json. Defaults to yaml.
	Output string
	// Timeout is the deadline of each call to the sidecar. Defaults to 30s,
	// the host's --reconcile-timeout.
	Timeout time.Duration
	// StartTimeout bounds the wait for the sidecar to serve. Defaults to 2m,
	// the host's --sidecar-wait-timeout (a `go run` compiles first).
	StartTimeout time.Duration
	// SidecarLogs copies the sidecar's output to stderr. Defaults to false:
	// it is shown only when the sidecar fails.
	SidecarLogs bool
}

// Render runs polyop render with o: it reads the inputs, connects to (or
// starts) the sidecar, calls it and writes the result to out. Diagnostics go
// to errOut.
func Render(ctx context.Context, o RenderOptions, out, errOut io.Writer) error {
	objs, err := readObjects(o.ObjectFile)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return fmt.Errorf("%s holds no object", o.ObjectFile)
	}
	var observed []fileObject
	if o.ObservedFile != "" {
		if observed, err = readObjects(o.ObservedFile); err != nil {
			return err
		}
	}
	var clusterObjs []fileObject
	if o.ClusterObjectsFile != "" {
		if clusterObjs, err = readObjects(o.ClusterObjectsFile); err != nil {
			return err
		}
	}
	var old *fileObject
	if o.OldObjectFile != "" {
		o, err := readObject(o.OldObjectFile)
		if err != nil {
			return err
		}
		old = &o
	}

	cl, err := startRenderCluster()
	if err != nil {
		return fmt.Errorf("serving the sidecar a Cluster service: %w", err)
	}
	defer cl.Stop()
	sc, proc, err := connect(ctx, o, errOut, cl.Address)
	if err != nil {
		return err
	}
	defer func() { _ = sc.Close() }()
	if proc != nil {
		defer proc.Stop()
	}
	// A call fails when the sidecar process dies under it; the error then
	// says so, with its output.
	explain := func(err error) error {
		if err == nil || proc == nil {
			return err
		}
		wait := time.Duration(0)
		if sidecar.IsUnavailable(err) {
			// The connection broke: the process is likely on its way out.
			wait = 2 * time.Second
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("%w\n%w", err, proc.ExitedError())
		case <-time.After(wait):
			return err
		}
	}

	desc, err := sc.Describe(ctx, version.Version)
	if err != nil {
		return explain(err)
	}
	cl.setIndexes(desc.Indexes)
	r := &renderer{opts: o, sc: sc, desc: desc, errOut: errOut, cluster: cl, clusterObjects: clusterObjs}
	r.mapper = r.clusterMapper(slices.Concat(objs, observed, clusterObjs))
	obj, err := r.pick(objs)
	if err != nil {
		return err
	}
	// The other objects of a sample are what the object needs: the sidecar
	// may read them.
	for _, o := range objs {
		if o.Unstructured != obj.Unstructured {
			r.clusterObjects = append(r.clusterObjects, o)
		}
	}
	result, err := r.render(ctx, obj, old, observed)
	if err != nil {
		return explain(err)
	}
	result.Writes = cl.Writes()
	// The sidecar is stopped before the result is written: a reader that
	// stops reading (polyop render ... | head) ends polyop with SIGPIPE,
	// which no deferred call outlives.
	if proc != nil {
		proc.Stop()
	}
	cl.Stop()
	return writeResult(out, result, o.Output)
}

// readObject reads the one object of a file.
func readObject(path string) (fileObject, error) {
	objs, err := readObjects(path)
	if err != nil {
		return fileObject{}, err
	}
	if len(objs) != 1 {
		return fileObject{}, fmt.Errorf("%s holds %d objects (%s): give one", path, len(objs), describeObjects(objs))
	}
	return objs[0], nil
}

// describeObjects names objs and where they start, for messages.
func describeObjects(objs []fileObject) string {
	var where []string
	for _, o := range objs {
		where = append(where, fmt.Sprintf("%s %q (line %d)", o.GetKind(), o.GetName(), o.Line))
	}
	return strings.Join(where, ", ")
}

// pick is the object of --object to render: the only one, or, when the file
// holds several (a sample with the objects it needs, say), the only one of a
// kind the sidecar reconciles (or, with --admission, admits). The others are
// named on errOut.
func (r *renderer) pick(objs []fileObject) (fileObject, error) {
	if len(objs) == 1 {
		return objs[0], nil
	}
	kinds := map[schema.GroupVersionKind]bool{}
	for _, c := range r.desc.Controllers {
		if r.opts.Controller == "" || c.Name == r.opts.Controller {
			kinds[c.GVK] = true
		}
	}
	if r.opts.Admission != "" {
		for _, w := range r.desc.Webhooks {
			kinds[w.GVK] = true
		}
	}
	var chosen, others []fileObject
	for _, o := range objs {
		if kinds[o.GroupVersionKind()] {
			chosen = append(chosen, o)
		} else {
			others = append(others, o)
		}
	}
	path := r.opts.ObjectFile
	switch len(chosen) {
	case 1:
		fmt.Fprintf(r.errOut, "polyop render: rendering %s %q (%s), the one object of %s the sidecar reconciles; not %s, which the Cluster service holds\n",
			chosen[0].GetKind(), chosen[0].GetName(), chosen[0].where(), path, describeObjects(others))
		return chosen[0], nil
	case 0:
		var names []string
		for gvk := range kinds {
			names = append(names, description.GVKString(gvk))
		}
		slices.Sort(names)
		return fileObject{}, fmt.Errorf("none of the %d objects of %s (%s) is of a kind sidecar %q reconciles: it reconciles %s",
			len(objs), path, describeObjects(objs), r.desc.Name, listOrNone(names))
	}
	return fileObject{}, fmt.Errorf("%s holds %d objects the sidecar reconciles (%s): render takes one; put it in a file of its own",
		path, len(chosen), describeObjects(chosen))
}

// connect returns a client of the sidecar, ready: the one at
// o.SidecarAddress, or the one it starts from o.Command (the process is
// returned, to be stopped).
func connect(ctx context.Context, o RenderOptions, errOut io.Writer, clusterAddress string) (*sidecar.Client, *sidecarprocess.SidecarProcess, error) {
	address := o.SidecarAddress
	var proc *sidecarprocess.SidecarProcess
	if address == "" {
		var logs io.Writer
		if o.SidecarLogs {
			logs = errOut
		}
		var err error
		if proc, err = sidecarprocess.StartSidecar(o.Command, logs, clusterAddress); err != nil {
			return nil, nil, err
		}
		address = proc.Address
	}
	fail := func(err error) (*sidecar.Client, *sidecarprocess.SidecarProcess, error) {
		if proc != nil {
			proc.Stop()
		}
		return nil, nil, err
	}
	sc, err := sidecar.New(sidecar.Options{Address: address, ClusterAddress: clusterAddress, DescribeTimeout: o.Timeout, ReconcileTimeout: o.Timeout})
	if err != nil {
		return fail(err)
	}
	var done <-chan struct{}
	if proc != nil {
		done = proc.Done()
	}
	if err := sidecarprocess.WaitServing(ctx, sc, done, o.StartTimeout); err != nil {
		_ = sc.Close()
		if proc != nil {
			select {
			case <-proc.Done():
				return fail(fmt.Errorf("the sidecar exited before it served: %w", proc.ExitedError()))
			default:
			}
		}
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		if proc != nil {
			return fail(fmt.Errorf("%w (was it started with %s %s? its command must serve there)%s", err, sidecarprocess.AddressFlag, proc.Address, proc.OutputNote()))
		}
		return fail(err)
	}
	return sc, proc, nil
}

// renderer calls one sidecar for one object.
type renderer struct {
	opts   RenderOptions
	sc     *sidecar.Client
	desc   *description.Description
	mapper meta.RESTMapper
	errOut io.Writer
	// cluster is the Cluster service the sidecar reads through.
	cluster *renderCluster
	// clusterObjects are the objects of --cluster-objects.
	clusterObjects []fileObject
}

func (r *renderer) render(ctx context.Context, obj fileObject, old *fileObject, observed []fileObject) (*RenderResult, error) {
	gvk := obj.GroupVersionKind()
	result := &RenderResult{Sidecar: r.desc.Name, Object: refOf(obj.Unstructured)}
	ctrl, ctrlErr := r.controllerFor(gvk)
	namespaced := r.namespaced(gvk)
	prepare(obj.Unstructured, namespaced)
	if old != nil {
		prepare(old.Unstructured, namespaced)
	}
	result.Object = refOf(obj.Unstructured)
	r.serve(obj.Unstructured, observed)

	if r.opts.Admission != "" {
		adm, admitted, err := r.admit(ctx, obj.Unstructured, old)
		if err != nil {
			return nil, err
		}
		result.Admission = adm
		if !admitted || r.opts.Admission == "delete" {
			return result, nil
		}
		if ctrlErr != nil && r.opts.Controller == "" {
			// Admitted, and nothing reconciles the kind: the admission
			// answer is all there is to render.
			return result, nil
		}
	}
	if ctrlErr != nil {
		return nil, ctrlErr
	}
	result.Controller = ctrl.Name
	rec, err := r.reconcile(ctx, ctrl, obj, observed)
	if err != nil {
		return nil, err
	}
	result.Reconcile = rec
	return result, nil
}

// controllerFor is the controller to call for an object of kind gvk.
func (r *renderer) controllerFor(gvk schema.GroupVersionKind) (description.Controller, error) {
	var names, kinds []string
	var matching []description.Controller
	for _, c := range r.desc.Controllers {
		names = append(names, c.Name)
		kinds = append(kinds, fmt.Sprintf("%s (controller %q)", description.GVKString(c.GVK), c.Name))
		if r.opts.Controller != "" {
			if c.Name == r.opts.Controller {
				if c.GVK != gvk {
					return c, fmt.Errorf("controller %q of sidecar %q reconciles %s, not %s, the kind of the object", c.Name, r.desc.Name, description.GVKString(c.GVK), description.GVKString(gvk))
				}
				return c, nil
			}
			continue
		}
		if c.GVK == gvk {
			matching = append(matching, c)
		}
	}
	switch {
	case r.opts.Controller != "":
		return description.Controller{}, fmt.Errorf("sidecar %q has no controller %q: its controllers are %s", r.desc.Name, r.opts.Controller, listOrNone(names))
	case len(matching) == 1:
		return matching[0], nil
	case len(matching) > 1:
		var ms []string
		for _, m := range matching {
			ms = append(ms, m.Name)
		}
		return description.Controller{}, fmt.Errorf("sidecar %q has %d controllers for %s (%s): choose one with --controller", r.desc.Name, len(matching), description.GVKString(gvk), strings.Join(ms, ", "))
	}
	return description.Controller{}, fmt.Errorf("sidecar %q has no controller for %s: it reconciles %s", r.desc.Name, description.GVKString(gvk), listOrNone(kinds))
}

func listOrNone(items []string) string {
	if len(items) == 0 {
		return "nothing (it declares no controllers)"
	}
	return strings.Join(items, ", ")
}

// namespaced guesses whether gvk lives in namespaces, as `host webhooks`
// does without an API server (description.GuessingMapper).
func (r *renderer) namespaced(gvk schema.GroupVersionKind) bool {
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err != nil || m.Scope.Name() == meta.RESTScopeNameNamespace
}

// prepare makes obj what the API server would hold: in namespace default
// when it is namespaced and names none, at generation 1 when it has none.
func prepare(obj *unstructured.Unstructured, namespaced bool) {
	if namespaced && obj.GetNamespace() == "" {
		obj.SetNamespace("default")
	}
	if obj.GetGeneration() == 0 {
		obj.SetGeneration(1)
	}
}

// reconcile sends one ReconcileRequest for obj to controller c, and checks
// the answer as the host would.
func (r *renderer) reconcile(ctx context.Context, c description.Controller, obj fileObject, observed []fileObject) (*ReconcileResult, error) {
	u := obj.Unstructured
	if c.Finalizer != "" {
		if u.GetDeletionTimestamp() != nil && slices.Contains(u.GetFinalizers(), c.Finalizer) {
			return nil, fmt.Errorf("%s: %s is being deleted and holds controller %q's finalizer: the host would call Finalize, which polyop render does not call; remove metadata.deletionTimestamp to render a Reconcile",
				obj.where(), refOf(u), c.Name)
		}
		if !slices.Contains(u.GetFinalizers(), c.Finalizer) && u.GetDeletionTimestamp() == nil {
			u.SetFinalizers(append(u.GetFinalizers(), c.Finalizer))
		}
	}
	kinds := make([]controller.ChildKind, 0, len(c.Owns))
	owned := map[schema.GroupVersionKind]description.Owned{}
	for _, o := range c.Owns {
		owned[o.GVK] = o
		kinds = append(kinds, controller.ChildKind{GVK: o.GVK, Namespaced: r.namespaced(o.GVK), SendObserved: o.SendObserved, Adopt: o.Adopt, ReplaceOnImmutable: o.ReplaceOnImmutable})
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", refOf(u), err)
	}
	req := &polyopv1alpha1.ReconcileRequest{
		Controller: c.Name,
		Kind:       &polyopv1alpha1.GroupVersionKind{Group: c.GVK.Group, Version: c.GVK.Version, Kind: c.GVK.Kind},
		Key:        &polyopv1alpha1.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()},
		Object:     raw,
	}
	for _, child := range observed {
		gvk := child.GroupVersionKind()
		o, ok := owned[gvk]
		if !ok {
			var names []string
			for _, o := range c.Owns {
				names = append(names, description.GVKString(o.GVK))
			}
			return nil, fmt.Errorf("%s: %s %q is not of a kind controller %q owns (it owns %s): the host never sends it as an observed child",
				child.where(), description.GVKString(gvk), child.GetName(), c.Name, listOrNone(names))
		}
		if !o.SendObserved {
			fmt.Fprintf(r.errOut, "polyop render: not sending %s %q (%s): controller %q owns %s without send_observed, so the host does not send its children\n",
				gvk.Kind, child.GetName(), child.where(), c.Name, description.GVKString(gvk))
			continue
		}
		if namespaced := r.namespaced(gvk); namespaced && child.GetNamespace() == "" {
			child.SetNamespace(u.GetNamespace())
		}
		b, err := child.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s: encoding %s %q: %w", child.where(), gvk.Kind, child.GetName(), err)
		}
		req.ObservedChildren = append(req.ObservedChildren, b)
	}

	r.serve(u, observed)
	resp, err := r.sc.Reconcile(ctx, req)
	var tooLarge *sidecar.TooLargeError
	if err != nil && !errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("the Reconcile call of controller %q for %s to the sidecar at %s failed: %w", c.Name, refOf(u), r.sc.Address(), err)
	}
	if err == nil {
		_, err = controller.CheckAnswer(resp, u, c.Name, kinds, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("controller %q answered the Reconcile of %s, but %w", c.Name, refOf(u), err)
	}
	return newReconcileResult(resp), nil
}

// clusterMapper maps the kinds the sidecar declares (as GuessingMapper does),
// the kinds of objs and Kubernetes' built-in kinds (so that a List of
// Namespaces, say, is empty rather than an error), each namespaced unless it
// is a built-in kind that is not.
func (r *renderer) clusterMapper(objs []fileObject) meta.RESTMapper {
	guessed := description.GuessingMapper(r.desc)
	extra := meta.NewDefaultRESTMapper(nil)
	kinds := make([]schema.GroupVersionKind, 0, len(objs))
	for _, o := range objs {
		kinds = append(kinds, o.GroupVersionKind())
	}
	builtin := slices.Collect(maps.Keys(clientgoscheme.Scheme.AllKnownTypes()))
	slices.SortFunc(builtin, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	for _, gvk := range builtin {
		if gvk.Version != runtime.APIVersionInternal && !strings.HasSuffix(gvk.Kind, "List") && !strings.HasSuffix(gvk.Kind, "Options") &&
			gvk.Kind != "WatchEvent" && gvk.Kind != "Status" {
			kinds = append(kinds, gvk)
		}
	}
	for _, gvk := range kinds {
		if _, err := guessed.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			continue
		}
		if _, err := extra.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			continue
		}
		plural, singular := meta.UnsafeGuessKindToResource(gvk)
		scope := meta.RESTScopeNamespace
		if description.ClusterScoped(gvk.GroupKind()) {
			scope = meta.RESTScopeRoot
		}
		extra.AddSpecific(gvk, plural, singular, scope)
	}
	return meta.MultiRESTMapper{guessed, extra}
}

// serve gives the Cluster service the objects the sidecar may read: obj, its
// observed children (in obj's namespace when they name none) and the objects
// of --cluster-objects (in namespace default when they name none).
func (r *renderer) serve(obj *unstructured.Unstructured, observed []fileObject) {
	objs := []*unstructured.Unstructured{obj}
	for _, group := range []struct {
		objs      []fileObject
		namespace string
	}{{observed, obj.GetNamespace()}, {r.clusterObjects, "default"}} {
		for _, o := range group.objs {
			u := o.DeepCopy()
			if r.namespaced(u.GroupVersionKind()) && u.GetNamespace() == "" {
				u.SetNamespace(group.namespace)
			}
			objs = append(objs, u)
		}
	}
	r.cluster.setObjects(r.mapper, objs)
}
