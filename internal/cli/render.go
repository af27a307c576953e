package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/polyop/polyop/internal/controller"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/host"
	"github.com/polyop/polyop/internal/sidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// RenderOptions are the flags of polyop render.
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

// NewRenderCommand returns polyop render.
func NewRenderCommand() *cobra.Command {
	o := RenderOptions{}
	cmd := &cobra.Command{
		Use:   "render --object FILE [--observed FILE] [--cluster-objects FILE] [--controller NAME] [--admission OP] (-- SIDECAR-COMMAND [ARGS...] | --sidecar-address ADDRESS)",
		Short: "Run one Reconcile (and admission) against a sidecar, with no cluster, and print its answer",
		Long: `Render runs your sidecar's logic on one object, with no cluster and no host,
and prints what the sidecar answered as YAML: the decision (requeueAfter, or a
failure), the status, the desired children and whether they are complete, and
the events. It is for tests and debugging, as crossplane render is for
Crossplane functions.

The sidecar is the command after "--": polyop starts it with
"--address unix://<temporary directory>/sidecar.sock" appended (the flag every
polyop SDK's entry point and example takes), waits for its health service to
report SERVING, asks it to describe itself, calls it, stops it and removes the
sockets, on every path, Ctrl-C included.
With --sidecar-address, polyop calls a sidecar you run yourself (under a
debugger, say) and leaves it running.

When the file of --object holds several objects (a sample with the objects it
needs), the one of a kind the sidecar reconciles is rendered. The object is read
as the API server would hold it: namespace "default" when a namespaced object
has none, generation 1 when unset, and the controller's
finalizer added when it declares one (the host adds it before the first
reconcile). The children in --observed (a YAML stream, or a List) are sent as
ReconcileRequest.observed_children for the owned kinds declared with
send_observed, as the host sends them.

A sidecar that reads and writes through the Cluster service (a
controller-runtime client on the Go SDK, say) gets one, in memory, as the host
gives it: its address is DescribeRequest.cluster_address and, for the sidecar
command, the environment variable POLYOP_CLUSTER_ADDRESS (a unix socket in a
temporary directory, removed with the sidecar's). It holds the object, the
other objects of its file, the children of --observed and the objects of
--cluster-objects (namespace
"default" when a namespaced one has none): a read of any other object is
NotFound, and a List of a built-in kind none of whose objects is given is
empty. A List by one value of an index the sidecar declares (or of the
host's owner-UID index) is answered as the host's cache answers it. Writes (create, update, patch, delete, events) are not applied: they
are printed, in order, under "writes:" (verb, kind, namespace/name, and the
object or the patch), so render shows what the reconciler would have written;
a read after a write still sees the object as given.

With --admission create|update|delete, the object goes through the sidecar's
webhooks for its kind first, as the API server would send it: Default (on
create and update) and then Validate on the defaulted object. A denial is
printed with the status the API server would return; otherwise the defaulted
object is then reconciled, unless the operation is delete. For update, give
the object as it was with --old-object.

The answer is checked as the host checks it: an answer the host would refuse
(a status that is not an object, a child of a kind the controller does not
own, in another namespace, ...) is an error that says why. A failure the
sidecar reports is part of the answer, not an error: polyop render exits 0.`,
		Example: `  # Reconcile a sample against a Go sidecar built from source
  polyop render --object config/samples/widget.yaml -- go run ./cmd/sidecar

  # ... against a Python sidecar, with the children the cluster holds (its
  # ResourceQuota, which the Tenant example lists by its declared index)
  polyop render --object tenant.yaml --cluster-objects quota.yaml -- .venv/bin/python -m tenant

  # Reconcile with a sidecar that reads a ConfigMap through the Cluster service
  polyop render --object website.yaml --cluster-objects configmap.yaml -- go run ./cmd/sidecar

  # Default and validate an object on create, then reconcile it
  polyop render --object widget.yaml --admission create -- node dist/main.js

  # Call a sidecar you run yourself, e.g. under a debugger
  polyop render --object widget.yaml --sidecar-address unix:///tmp/widget.sock`,
		Args: func(cmd *cobra.Command, args []string) error {
			o.Command = args
			return o.validate(cmd.ArgsLenAtDash())
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Render(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.ObjectFile, "object", "f", "", "YAML file of the object to reconcile: one object, or a sample of several of which one is of a kind the sidecar reconciles. Required.")
	f.StringVar(&o.ObservedFile, "observed", "", "YAML file of the object's children as the cluster holds them (a stream of documents, or a List), sent as observed children.")
	f.StringVar(&o.ClusterObjectsFile, "cluster-objects", "", "YAML file of other objects the sidecar may read through the Cluster service (a ConfigMap it reads, say): a stream of documents, or a List.")
	f.StringVar(&o.OldObjectFile, "old-object", "", "YAML file of the object as it was, for --admission update.")
	f.StringVar(&o.Controller, "controller", "", "The controller to call, when the sidecar has several for the object's kind. Defaults to the one that reconciles it.")
	f.StringVar(&o.Admission, "admission", "", "Admit the object first, through the sidecar's Default and Validate webhooks for its kind, for this operation: create, update or delete.")
	f.StringVar(&o.SidecarAddress, "sidecar-address", "", "Call the sidecar serving at this address (unix:///path.sock, tcp://host:port or host:port) instead of starting one.")
	f.StringVarP(&o.Output, "output", "o", "yaml", "Output format: yaml or json.")
	f.DurationVar(&o.Timeout, "timeout", 30*time.Second, "Deadline of each call to the sidecar (the host's --reconcile-timeout).")
	f.DurationVar(&o.StartTimeout, "start-timeout", 2*time.Minute, "How long to wait for the sidecar to serve (a go run compiles first).")
	f.BoolVar(&o.SidecarLogs, "sidecar-logs", false, "Copy the sidecar's output to stderr. By default it is shown only when the sidecar fails.")
	_ = cmd.MarkFlagRequired("object")
	return cmd
}

// validate checks the flags and arguments; dash is where "--" was, or -1.
func (o *RenderOptions) validate(dash int) error {
	switch {
	case len(o.Command) > 0 && dash != 0:
		return fmt.Errorf("unexpected argument %q: the sidecar command comes after \"--\" (polyop render --object FILE -- COMMAND ARGS...)", o.Command[0])
	case len(o.Command) > 0 && o.SidecarAddress != "":
		return errors.New("give a sidecar command after \"--\" or --sidecar-address, not both")
	case len(o.Command) == 0 && o.SidecarAddress == "":
		return errors.New("no sidecar: give its command after \"--\" (polyop render --object FILE -- COMMAND ARGS...) or the address of a running one with --sidecar-address")
	}
	switch o.Admission {
	case "", "create", "update", "delete":
	default:
		return fmt.Errorf("unknown --admission %q: use create, update or delete", o.Admission)
	}
	if o.Admission == "update" && o.OldObjectFile == "" {
		return errors.New("--admission update needs the object as it was: give it with --old-object")
	}
	if o.OldObjectFile != "" && o.Admission != "update" {
		return errors.New("--old-object is for --admission update only")
	}
	if o.Output != "yaml" && o.Output != "json" {
		return fmt.Errorf("unknown --output %q: use yaml or json", o.Output)
	}
	return nil
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

	desc, err := sc.Describe(ctx, host.Version)
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
func connect(ctx context.Context, o RenderOptions, errOut io.Writer, clusterAddress string) (*sidecar.Client, *SidecarProcess, error) {
	address := o.SidecarAddress
	var proc *SidecarProcess
	if address == "" {
		var logs io.Writer
		if o.SidecarLogs {
			logs = errOut
		}
		var err error
		if proc, err = StartSidecar(o.Command, logs, clusterAddress); err != nil {
			return nil, nil, err
		}
		address = proc.Address
	}
	fail := func(err error) (*sidecar.Client, *SidecarProcess, error) {
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
	if err := waitServing(ctx, sc, done, o.StartTimeout); err != nil {
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
			return fail(fmt.Errorf("%w (was it started with %s %s? its command must serve there)%s", err, AddressFlag, proc.Address, proc.outputNote()))
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
