package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/polyop/polyop/internal/render"
)

// NewRenderCommand returns polyop render.
func NewRenderCommand() *cobra.Command {
	o := render.RenderOptions{}
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

  # Call a sidecar you run yourself under a debugger, with an hour to step through
  # the call (docs/debugging.md)
  polyop render --object widget.yaml --sidecar-address unix:///tmp/widget/sidecar.sock --timeout 1h`,
		Args: func(cmd *cobra.Command, args []string) error {
			o.Command = args
			return validateRender(&o, cmd.ArgsLenAtDash())
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The sidecar client logs through controller-runtime's logger
			// (a call held past its deadline); render reports its errors
			// itself, and without a logger controller-runtime prints a stack
			// trace 30s in (a sidecar paused in a debugger).
			logf.SetLogger(logr.Discard())
			return render.Render(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
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

// validateRender checks polyop render's flags and arguments; dash is where
// "--" was, or -1.
func validateRender(o *render.RenderOptions, dash int) error {
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
