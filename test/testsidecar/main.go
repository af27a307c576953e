package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/test/testsidecar/children"
	"github.com/polyop/polyop/test/testsidecar/finalize"
	"github.com/polyop/polyop/test/testsidecar/index"
	"github.com/polyop/polyop/test/testsidecar/trace"
)

// modes are the sidecars testsidecar is besides its own, each the first
// argument: testsidecar MODE [flags].
var modes = map[string]func(args []string){
	"children": children.Main,
	"finalize": finalize.Main,
	"index":    index.Main,
	"trace":    trace.Main,
}

func main() {
	if len(os.Args) > 1 {
		if mode, ok := modes[os.Args[1]]; ok {
			mode(os.Args[2:])
			return
		}
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsidecar:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&cfg.zap)))
	if err := run(ctrl.SetupSignalHandler(), cfg); err != nil {
		ctrl.Log.Error(err, "testsidecar failed")
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	address                 string
	controllerName          string
	protocolVersion         *polyopv1alpha1.ProtocolVersion
	kindOverride            *polyopv1alpha1.GroupVersionKind
	updateFilters           []sidecar.UpdateFilter
	labelSelector           string
	namespaces              []string
	maxConcurrentReconciles int
	delay                   time.Duration
	logFile                 string
	overlapDir              string
	exitEvery               int
	instance                string
	childConfigMap          bool
	childGeneration         bool
	freezePIDFile           string
	webhooks                webhookConfig
	sidecar                 sidecar.Options
	zap                     zap.Options
}

func parseFlags(args []string, output io.Writer) (config, error) {
	cfg := config{sidecar: sidecar.Options{Name: "testsidecar"}}
	var kindOverride, updateFilters, namespaces string
	fs := flag.NewFlagSet("testsidecar", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&cfg.address, "address", sidecar.DefaultAddress, "Where to serve the sidecar API.")
	fs.StringVar(&cfg.sidecar.Name, "name", cfg.sidecar.Name, "The sidecar's name.")
	fs.StringVar(&cfg.controllerName, "controller-name", "maintenancewindow", "The controller's name.")
	fs.Func("protocol-version", "The protocol version Describe answers: a ProtocolVersion name or number, for example PROTOCOL_VERSION_UNSPECIFIED or 9. Unset: the SDK's.",
		func(s string) error {
			v, err := parseProtocolVersion(s)
			cfg.protocolVersion = &v
			return err
		})
	fs.StringVar(&kindOverride, "kind-override", "", "The kind Describe declares, as group/version/Kind. Empty: MaintenanceWindow.")
	fs.StringVar(&updateFilters, "update-filters", "", "Comma-separated update filters: generation, labels, annotations, deletion.")
	fs.StringVar(&cfg.labelSelector, "label-selector", "", "The controller's label selector.")
	fs.StringVar(&namespaces, "namespaces", "", "Comma-separated namespaces the controller declares. Empty: all.")
	fs.IntVar(&cfg.maxConcurrentReconciles, "max-concurrent-reconciles", 0, "The controller's concurrency. 0: the host's default.")
	fs.DurationVar(&cfg.delay, "delay", 0, "How long each reconcile sleeps first.")
	fs.StringVar(&cfg.logFile, "log-file", "", "Append one JSON line per reconcile call to this file.")
	fs.StringVar(&cfg.overlapDir, "overlap-dir", "",
		"A directory shared by several sidecars: each reconcile holds a lock file per object in it while it runs, and one that finds the object's "+
			"lock held (another reconcile of the object in flight, in any sidecar) appends a line to overlaps.log there.")
	fs.IntVar(&cfg.exitEvery, "exit-every", 0,
		"Exit (status 3) on receiving every Nth Reconcile call, before answering it, as a sidecar in a crash loop does; 0: never.")
	fs.StringVar(&cfg.instance, "instance", "",
		"Which of several sidecars this is: recorded in each call log line and in the Ready condition's message (\"Reconciled by INSTANCE\").")
	fs.BoolVar(&cfg.childConfigMap, "child-configmap", false,
		"Own ConfigMaps: each reconcile desires a ConfigMap named after the window, its controller.")
	fs.BoolVar(&cfg.childGeneration, "child-generation", false,
		"With --child-configmap, put the window's generation in its ConfigMap's data, so that a child written from an older view shows it.")
	fs.StringVar(&cfg.freezePIDFile, "freeze-pid-file", "",
		"A file holding a process ID: a reconcile of a window with the annotation "+annotationFreezeHost+" (during or after) stops that process "+
			"(SIGSTOP) during the call or right after its answer, and removes the file.")
	fs.BoolVar(&cfg.webhooks.enabled, "webhooks", false, "Also declare and serve a defaulter and a validator of MaintenanceWindow.")
	fs.StringVar(&cfg.webhooks.failurePolicy, "webhook-failure-policy", "", "The webhooks' failure policy: fail or ignore.")
	fs.IntVar(&cfg.webhooks.timeoutSeconds, "webhook-timeout-seconds", 0, "The webhooks' timeout in seconds (0: the default, 10).")
	fs.StringVar(&cfg.webhooks.logFile, "admission-log-file", "", "Append one JSON line per admission call to this file.")
	cfg.sidecar.BindFlags(fs)
	cfg.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	var err error
	if cfg.kindOverride, err = parseKind(kindOverride); err != nil {
		return config{}, err
	}
	if cfg.updateFilters, err = parseUpdateFilters(updateFilters); err != nil {
		return config{}, err
	}
	cfg.namespaces = splitList(namespaces)
	return cfg, nil
}

// parseKind parses group/version/Kind, or version/Kind for the core group;
// empty is no override.
func parseKind(s string) (*polyopv1alpha1.GroupVersionKind, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, "/")
	if len(parts) == 2 {
		parts = append([]string{""}, parts...)
	}
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return nil, fmt.Errorf("--kind-override %q: want group/version/Kind, or version/Kind for the core group", s)
	}
	return &polyopv1alpha1.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}, nil
}

var updateFilterNames = map[string]sidecar.UpdateFilter{
	"generation":  sidecar.GenerationChanged,
	"labels":      sidecar.LabelsChanged,
	"annotations": sidecar.AnnotationsChanged,
	"deletion":    sidecar.DeletionChanged,
}

func parseUpdateFilters(s string) ([]sidecar.UpdateFilter, error) {
	var filters []sidecar.UpdateFilter
	for _, name := range splitList(s) {
		f, ok := updateFilterNames[name]
		if !ok {
			return nil, fmt.Errorf("--update-filters: unknown filter %q; want generation, labels, annotations or deletion", name)
		}
		filters = append(filters, f)
	}
	return filters, nil
}

func splitList(s string) []string {
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// run serves the sidecar until ctx is done.
func run(ctx context.Context, cfg config) error {
	srv, calls, err := newServer(cfg)
	if err != nil {
		return err
	}
	defer calls.Close()
	return srv.Serve(ctx, cfg.address)
}

// newServer builds the sidecar and opens its call log, if any.
func newServer(cfg config) (*sidecar.Server, *callLog, error) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	opts := cfg.sidecar
	opts.Scheme = scheme
	opts.ServerOptions = append(opts.ServerOptions, grpc.ChainUnaryInterceptor(garbleStatus, garbleDefault),
		grpc.ChainStreamInterceptor(garbleStreamedStatus))
	if cfg.protocolVersion != nil || cfg.kindOverride != nil {
		opts.ServerOptions = append(opts.ServerOptions,
			grpc.ChainUnaryInterceptor(overrideDescribe(cfg.protocolVersion, cfg.kindOverride)))
	}
	srv, err := sidecar.New(opts)
	if err != nil {
		return nil, nil, err
	}

	var calls *callLog
	if cfg.logFile != "" {
		if calls, err = openCallLog(cfg.logFile); err != nil {
			return nil, nil, err
		}
	}
	b := sidecar.NewControllerManagedBy[*v1.MaintenanceWindow](srv).
		Named(cfg.controllerName).
		WithUpdateFilters(cfg.updateFilters...).
		WithLabelSelector(cfg.labelSelector).
		InNamespaces(cfg.namespaces...).
		WithMaxConcurrentReconciles(cfg.maxConcurrentReconciles)
	if cfg.childConfigMap {
		b = b.Owns(&corev1.ConfigMap{})
	}
	err = b.Complete(&reconciler{
		delay: cfg.delay, calls: calls, overlaps: overlapDetector(cfg.overlapDir), exitEvery: int64(cfg.exitEvery),
		instance: cfg.instance, childConfigMap: cfg.childConfigMap, childGeneration: cfg.childGeneration,
		freezer: freezer{path: cfg.freezePIDFile},
	})
	if err == nil && cfg.webhooks.enabled {
		var admissions *admissionLog
		if admissions, err = openAdmissionLog(cfg.webhooks.logFile); err == nil {
			// The log stays open while the process runs.
			err = registerWebhooks(srv, cfg.webhooks, admissions)
		}
	}
	if err != nil {
		_ = calls.Close()
		return nil, nil, err
	}
	return srv, calls, nil
}

// garbleStatus replaces the status of a Reconcile answer with JSON that is not
// an object when the object carries the annotationBadStatus annotation, or
// with a JSON object of the size annotationStatusSize says, so tests can see
// the host refuse a malformed or oversized answer.
func garbleStatus(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	in, ok := req.(*polyopv1alpha1.ReconcileRequest)
	out, isReconcile := resp.(*polyopv1alpha1.ReconcileResponse)
	if err != nil || !ok || !isReconcile {
		return resp, err
	}
	if err := garble(in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// garbleStreamedStatus does what garbleStatus does to the Reconcile calls
// made on a ReconcileStream: the host sends one call at a time on a stream,
// so each answer is garbled by the request read last.
func garbleStreamedStatus(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &garblingStream{ServerStream: ss})
}

// garblingStream is a ReconcileStream whose Reconcile answers garble changes.
type garblingStream struct {
	grpc.ServerStream
	last *polyopv1alpha1.ReconcileRequest
}

func (s *garblingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if req, ok := m.(*polyopv1alpha1.ReconcileStreamRequest); ok && err == nil {
		s.last = req.GetReconcile()
	}
	return err
}

func (s *garblingStream) SendMsg(m any) error {
	if resp, ok := m.(*polyopv1alpha1.ReconcileStreamResponse); ok && s.last != nil && resp.GetReconcile() != nil {
		if err := garble(s.last, resp.GetReconcile()); err != nil {
			resp.Result = &polyopv1alpha1.ReconcileStreamResponse_Error{Error: &polyopv1alpha1.CallStatus{
				Code: int32(status.Code(err)), Message: status.Convert(err).Message(),
			}}
		}
	}
	return s.ServerStream.SendMsg(m)
}

// garble changes out, the answer to in, as in's object's annotations say.
func garble(in *polyopv1alpha1.ReconcileRequest, out *polyopv1alpha1.ReconcileResponse) error {
	if len(in.GetObject()) == 0 {
		return nil
	}
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(in.GetObject(), &obj) != nil {
		return nil
	}
	if how, bad := obj.Metadata.Annotations[annotationBadStatus]; bad {
		out.Status = []byte(`["not", "an", "object"]`)
		if how == "not-json" {
			out.Status = []byte(`{"phase": `)
		}
	}
	if size, ok := obj.Metadata.Annotations[annotationStatusSize]; ok {
		q, err := resource.ParseQuantity(size)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "annotation %s: %v", annotationStatusSize, err)
		}
		out.Status = paddedObject(int(q.Value()))
	}
	return nil
}

// paddedObject is a JSON object of size bytes (at least 10).
func paddedObject(size int) []byte {
	const head, tail = `{"pad":"`, `"}`
	b := make([]byte, 0, max(size, len(head)+len(tail)))
	b = append(b, head...)
	for len(b) < size-len(tail) {
		b = append(b, 'x')
	}
	return append(b, tail...)
}

// parseProtocolVersion reads a ProtocolVersion by its name in the proto or
// its number, so that a test can answer a version the SDK does not know.
func parseProtocolVersion(s string) (polyopv1alpha1.ProtocolVersion, error) {
	if v, ok := polyopv1alpha1.ProtocolVersion_value[s]; ok {
		return polyopv1alpha1.ProtocolVersion(v), nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a ProtocolVersion name nor a number", s)
	}
	return polyopv1alpha1.ProtocolVersion(n), nil
}

// overrideDescribe wraps the Server's Describe: it changes the protocol
// version and the controllers' kind in the answer, when they are set.
func overrideDescribe(protocolVersion *polyopv1alpha1.ProtocolVersion, kind *polyopv1alpha1.GroupVersionKind) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		described, ok := resp.(*polyopv1alpha1.DescribeResponse)
		if err != nil || !ok || info.FullMethod != polyopv1alpha1.SidecarService_Describe_FullMethodName {
			return resp, err
		}
		if protocolVersion != nil {
			described.ProtocolVersion = *protocolVersion
		}
		if kind != nil {
			for _, c := range described.GetControllers() {
				c.ForKind = &polyopv1alpha1.GroupVersionKind{Group: kind.GetGroup(), Version: kind.GetVersion(), Kind: kind.GetKind()}
			}
		}
		return described, nil
	}
}
