package children

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/sidecar"
	sdkaddress "github.com/polyop/polyop/sdk/go/address"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Main runs the mode with the command line args, and exits the process
// when it fails.
func Main(args []string) {
	fs := flag.NewFlagSet("testsidecar children", flag.ExitOnError)
	address := fs.String("address", sdkaddress.Default, "Where to serve: unix:///path.sock or host:port.")
	name := fs.String("name", "childsidecar", "The sidecar's name.")
	controller := fs.String("controller-name", "widget", "The controller's name.")
	finalizer := fs.String("finalizer", "e2e.polyop.dev/cleanup", "The controller's finalizer; empty for none.")
	logFile := fs.String("log-file", "", "Append one JSON line per call to this file.")
	adoptConfigMaps := fs.Bool("adopt-configmaps", false, "Declare adopt for the owned ConfigMaps.")
	ownJobs := fs.Bool("own-jobs", false, "Own batch/v1 Jobs too (spec.jobs, spec.jobImage).")
	replaceJobs := fs.Bool("replace-jobs", false, "Own batch/v1 Jobs and declare replace_on_immutable for them.")
	skipUnchanged := fs.Bool("skip-unchanged-inputs", false, "Declare skip_unchanged_inputs for the controller, and no watches.")
	_ = fs.Parse(args)

	s := &server{
		name: *name, controller: *controller, finalizer: *finalizer,
		adoptConfigMaps: *adoptConfigMaps, ownJobs: *ownJobs || *replaceJobs, replaceJobs: *replaceJobs,
		skipUnchanged: *skipUnchanged,
	}
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		s.log = f
	}
	if err := serve(s, *address); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "childsidecar:", err)
	os.Exit(1)
}

// serve serves s and the health service until SIGTERM or SIGINT.
func serve(s *server, address string) error {
	network, addr := "tcp", strings.TrimPrefix(address, "tcp://")
	if path, ok := strings.CutPrefix(address, "unix://"); ok {
		network, addr = "unix", path
		_ = os.Remove(path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	polyopv1alpha1.RegisterSidecarServiceServer(srv, s)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-stop; srv.GracefulStop() }()
	return srv.Serve(lis)
}

var (
	widgetKind     = &polyopv1alpha1.GroupVersionKind{Group: "e2e.polyop.dev", Version: "v1", Kind: "Widget"}
	configMapKind  = &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretKind     = &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"}
	jobKind        = &polyopv1alpha1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	serviceAccount = &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}
)

// server is the sidecar.
type server struct {
	polyopv1alpha1.UnimplementedSidecarServiceServer
	name, controller, finalizer string
	// What the controller declares of its owned kinds.
	adoptConfigMaps, ownJobs, replaceJobs bool
	// Whether the controller declares skip_unchanged_inputs.
	skipUnchanged bool

	mu      sync.Mutex
	log     *os.File
	cluster polyopv1alpha1.ClusterServiceClient
}

// Describe implements polyopv1alpha1.SidecarServiceServer and connects to the
// host's cluster service.
func (s *server) Describe(_ context.Context, req *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error) {
	address := req.GetClusterAddress()
	if address == "" {
		address = os.Getenv("POLYOP_CLUSTER_ADDRESS")
	}
	if address != "" {
		target, err := sidecar.Target(address)
		if err != nil {
			return nil, err
		}
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.cluster = polyopv1alpha1.NewClusterServiceClient(conn)
		s.mu.Unlock()
	}
	owns := []*polyopv1alpha1.OwnedKind{
		{Kind: configMapKind, SendObserved: true, Adopt: s.adoptConfigMaps},
		{Kind: secretKind},
	}
	if s.ownJobs {
		owns = append(owns, &polyopv1alpha1.OwnedKind{Kind: jobKind, ReplaceOnImmutable: s.replaceJobs})
	}
	watches := []*polyopv1alpha1.Watch{
		{Kind: configMapKind, Mapping: &polyopv1alpha1.Watch_FieldPath{FieldPath: "spec.configMapName"}},
		{Kind: configMapKind, Mapping: &polyopv1alpha1.Watch_Annotation{Annotation: "e2e.polyop.dev/widget"}},
		{Kind: serviceAccount, Mapping: &polyopv1alpha1.Watch_Label{Label: "e2e.polyop.dev/widget"}},
	}
	if s.skipUnchanged {
		// The host refuses watches beside skip_unchanged_inputs.
		watches = nil
	}
	return &polyopv1alpha1.DescribeResponse{
		ProtocolVersion: description.ProtocolVersion,
		Name:            s.name,
		Controllers: []*polyopv1alpha1.ControllerDescription{{
			Name:                s.controller,
			ForKind:             widgetKind,
			Owns:                owns,
			Watches:             watches,
			Finalizer:           s.finalizer,
			SkipUnchangedInputs: s.skipUnchanged,
		}},
	}, nil
}

// widget is the part of a Widget the sidecar reads.
type widget struct {
	Metadata struct {
		Namespace         string            `json:"namespace"`
		Name              string            `json:"name"`
		Generation        int64             `json:"generation"`
		ResourceVersion   string            `json:"resourceVersion"`
		Annotations       map[string]string `json:"annotations"`
		Finalizers        []string          `json:"finalizers"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		ConfigMaps    []string `json:"configMaps"`
		Secrets       []string `json:"secrets"`
		Jobs          []string `json:"jobs"`
		JobImage      string   `json:"jobImage"`
		Value         string   `json:"value"`
		Partial       bool     `json:"partial"`
		Fail          string   `json:"fail"`
		FailRetry     string   `json:"failRetryAfter"`
		BadChild      string   `json:"badChild"`
		ConfigMapName string   `json:"configMapName"`
		RequeueAfter  string   `json:"requeueAfter"`
	} `json:"spec"`
}

// child is the part of an observed child the sidecar reads.
type child struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

// Reconcile implements polyopv1alpha1.SidecarServiceServer.
func (s *server) Reconcile(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
	var w widget
	if len(req.GetObject()) > 0 {
		if err := json.Unmarshal(req.GetObject(), &w); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "decoding the widget: %v", err)
		}
	}
	var observed, observedConfigMaps []string
	for _, raw := range req.GetObservedChildren() {
		var c child
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "decoding a child: %v", err)
		}
		observed = append(observed, c.Kind+"/"+c.Metadata.Name)
		if c.Kind == "ConfigMap" {
			observedConfigMaps = append(observedConfigMaps, c.Metadata.Name)
		}
	}
	s.record("Reconcile", req.GetKey(), len(req.GetObject()) > 0, w, req.GetRetries(), observed)
	if len(req.GetObject()) == 0 {
		return &polyopv1alpha1.ReconcileResponse{}, nil
	}

	resp := &polyopv1alpha1.ReconcileResponse{ChildrenComplete: !w.Spec.Partial}
	for _, name := range w.Spec.ConfigMaps {
		resp.DesiredChildren = append(resp.DesiredChildren, mustJSON(map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "labels": map[string]any{"e2e.polyop.dev/owner": w.Metadata.Name}},
			"data":     map[string]any{"value": w.Spec.Value},
		}))
	}
	for _, name := range w.Spec.Secrets {
		resp.DesiredChildren = append(resp.DesiredChildren, mustJSON(map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": name},
			"data":     map[string]any{"value": base64.StdEncoding.EncodeToString([]byte(w.Spec.Value))},
		}))
	}
	for _, name := range w.Spec.Jobs {
		resp.DesiredChildren = append(resp.DesiredChildren, mustJSON(map[string]any{
			"apiVersion": "batch/v1", "kind": "Job",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never",
				"containers":    []any{map[string]any{"name": "main", "image": w.Spec.JobImage}},
			}}},
		}))
	}
	switch w.Spec.BadChild {
	case "":
	case "not-json":
		resp.DesiredChildren = append(resp.DesiredChildren, []byte(`{"apiVersion": "v1", "kind": `))
	case "wrong-kind":
		resp.DesiredChildren = append(resp.DesiredChildren, mustJSON(map[string]any{
			"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "not-owned"},
		}))
	case "no-name":
		resp.DesiredChildren = append(resp.DesiredChildren, mustJSON(map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"generateName": "x-"},
		}))
	case "other-namespace":
		resp.DesiredChildren = append(resp.DesiredChildren, mustJSON(map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "elsewhere", "namespace": "kube-system"},
		}))
	case "too-big":
		// Over the 3 MiB the API server accepts in a request.
		resp.DesiredChildren = append(resp.DesiredChildren, mustJSON(map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "huge"},
			"data": map[string]any{"value": strings.Repeat("x", 4<<20)},
		}))
	}
	if w.Spec.Fail != "" {
		resp.Error = &polyopv1alpha1.Failure{Message: w.Spec.Fail}
		if w.Spec.FailRetry != "" {
			d, err := time.ParseDuration(w.Spec.FailRetry)
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "spec.failRetryAfter: %v", err)
			}
			resp.Error.RetryAfter = durationpb.New(d)
		}
	}
	if w.Spec.RequeueAfter != "" {
		d, err := time.ParseDuration(w.Spec.RequeueAfter)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "spec.requeueAfter: %v", err)
		}
		resp.RequeueAfter = durationpb.New(d)
	}

	st := map[string]any{"phase": "Ready", "observedGeneration": w.Metadata.Generation, "configMaps": observedConfigMaps}
	if w.Spec.ConfigMapName != "" {
		value, source, err := s.readConfigMap(ctx, w.Metadata.Namespace, w.Spec.ConfigMapName)
		if err != nil {
			return nil, err
		}
		st["configMapValue"], st["configMapSource"] = value, source
	}
	resp.Status = mustJSON(st)
	return resp, nil
}

// readConfigMap reads data.value of a ConfigMap through the host's cluster
// service, "<missing>" when there is no such ConfigMap.
func (s *server) readConfigMap(ctx context.Context, namespace, name string) (value, source string, err error) {
	s.mu.Lock()
	c := s.cluster
	s.mu.Unlock()
	if c == nil {
		return "", "", status.Error(codes.FailedPrecondition, "the host serves no cluster service")
	}
	got, err := c.Get(ctx, &polyopv1alpha1.GetRequest{Kind: configMapKind, Key: &polyopv1alpha1.ObjectKey{Namespace: namespace, Name: name}})
	if isNotFound(err) {
		return "<missing>", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("reading ConfigMap %s/%s through the cluster service: %w", namespace, name, err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(got.GetObject(), &cm); err != nil {
		return "", "", err
	}
	return cm.Data["value"], strings.ToLower(strings.TrimPrefix(got.GetSource().String(), "READ_SOURCE_")), nil
}

// isNotFound reads the API server's reason from the APIError detail, as any
// client of the cluster service would.
func isNotFound(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.NotFound {
		return false
	}
	for _, d := range st.Details() {
		if e, ok := d.(*polyopv1alpha1.APIError); ok {
			var s struct {
				Reason string `json:"reason"`
			}
			return json.Unmarshal(e.GetStatus(), &s) == nil && s.Reason == "NotFound"
		}
	}
	return false
}

// Finalize implements polyopv1alpha1.SidecarServiceServer.
func (s *server) Finalize(ctx context.Context, req *polyopv1alpha1.FinalizeRequest) (*polyopv1alpha1.FinalizeResponse, error) {
	var w widget
	if err := json.Unmarshal(req.GetObject(), &w); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "decoding the widget: %v", err)
	}
	s.record("Finalize", req.GetKey(), true, w, req.GetRetries(), nil)
	switch w.Metadata.Annotations["e2e.polyop.dev/finalize"] {
	case "fail":
		return &polyopv1alpha1.FinalizeResponse{Error: &polyopv1alpha1.Failure{Message: "cleanup failed"}}, nil
	case "wait":
		return &polyopv1alpha1.FinalizeResponse{RequeueAfter: durationpb.New(200 * time.Millisecond)}, nil
	}
	if name := w.Metadata.Annotations["e2e.polyop.dev/cleanup-configmap"]; name != "" {
		s.mu.Lock()
		c := s.cluster
		s.mu.Unlock()
		_, err := c.Delete(ctx, &polyopv1alpha1.DeleteRequest{Kind: configMapKind, Key: &polyopv1alpha1.ObjectKey{Namespace: w.Metadata.Namespace, Name: name}})
		if err != nil && !isNotFound(err) {
			return &polyopv1alpha1.FinalizeResponse{Error: &polyopv1alpha1.Failure{Message: err.Error()}}, nil
		}
	}
	return &polyopv1alpha1.FinalizeResponse{Events: []*polyopv1alpha1.Event{{
		Type: polyopv1alpha1.EventType_EVENT_TYPE_NORMAL, Reason: "Finalized", Message: "cleaned up",
	}}}, nil
}

// call is one line of the call log.
type call struct {
	Time            time.Time `json:"time"`
	Method          string    `json:"method"`
	Namespace       string    `json:"namespace"`
	Name            string    `json:"name"`
	Exists          bool      `json:"exists"`
	Generation      int64     `json:"generation,omitempty"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
	Retries         int32     `json:"retries"`
	Children        []string  `json:"children"`
	Finalizers      []string  `json:"finalizers"`
	Deleting        bool      `json:"deleting,omitempty"`
}

func (s *server) record(method string, key *polyopv1alpha1.ObjectKey, exists bool, w widget, retries int32, children []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return
	}
	line, _ := json.Marshal(call{
		Time: time.Now(), Method: method, Namespace: key.GetNamespace(), Name: key.GetName(), Exists: exists,
		Generation: w.Metadata.Generation, ResourceVersion: w.Metadata.ResourceVersion, Retries: retries,
		Children: children, Finalizers: w.Metadata.Finalizers, Deleting: w.Metadata.DeletionTimestamp != nil,
	})
	if _, err := s.log.Write(append(line, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, "childsidecar: writing the call log:", err)
	}
}

func mustJSON(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}
