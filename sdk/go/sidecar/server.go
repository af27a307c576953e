package sidecar

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/internal/cacheversions"
)

// ProtocolVersion is the version of the polyop protocol this package speaks,
// answered in DescribeResponse.protocol_version. It is the generated
// constant of the proto's ProtocolVersion enum.
const ProtocolVersion = polyopv1alpha1.ProtocolVersion_PROTOCOL_VERSION_V1ALPHA1

// SDKName is the name of this SDK, answered in DescribeResponse.sdk_name.
const SDKName = "polyop-go"

// SDKVersion is the version of this SDK, answered in
// DescribeResponse.sdk_version.
const SDKVersion = "0.1.0"

// Server is the sidecar: what New makes, what the controllers and webhooks are
// registered on (NewControllerManagedBy, NewWebhookManagedBy) and what Serve
// serves to the host. Its methods are those a user calls; the gRPC service
// the host calls is Serve's business, and sidecartest calls it as the host
// would.
//
// Register every controller before serving: the host asks for them once, at
// start. A Server is safe for concurrent use.
type Server struct {
	opts Options
	log  logr.Logger

	mu          sync.RWMutex
	controllers map[string]*controller
	order       []string // registration order, for Describe
	serving     bool
	admission   admissionRegistry                  // webhooks and conversions, see webhook.go
	indexes     []*polyopv1alpha1.IndexDescription // see Index
	cachedKinds []*polyopv1alpha1.CachedKind       // see CacheKind

	cluster clusterAccess // the host's Cluster service, for GetClient

	// tracer traces the calls on ReconcileStreams; nil when the Server does
	// not trace. Set before it serves.
	tracer trace.Tracer
	// stopping is closed when the Server starts to stop: idle
	// ReconcileStreams end then.
	stopping chan struct{}
}

// controller is one registration: what Describe says about it and how to
// reconcile one of its objects.
type controller struct {
	desc *polyopv1alpha1.ControllerDescription
	gvk  schema.GroupVersionKind
	// reconcile handles one request whose controller and key are known; object
	// is empty when the object is gone.
	reconcile func(ctx context.Context, req Request, object []byte) (*polyopv1alpha1.ReconcileResponse, error)
	// finalize handles one Finalize request; nil without a finalizer.
	finalize func(ctx context.Context, req Request, object []byte) (*polyopv1alpha1.FinalizeResponse, error)
}

// New returns a Server with no controllers.
func New(opts Options) (*Server, error) {
	if opts.Name == "" {
		return nil, errors.New("sidecar: Options.Name is required")
	}
	if errs := validation.IsDNS1123Label(opts.Name); len(errs) > 0 {
		return nil, fmt.Errorf("sidecar: Options.Name %q is not a valid name: %v", opts.Name, errs)
	}
	if opts.MaxMessageSize < 0 {
		return nil, fmt.Errorf("sidecar: Options.MaxMessageSize must not be negative, got %d", opts.MaxMessageSize)
	}
	if opts.GracefulShutdownTimeout < 0 {
		return nil, fmt.Errorf("sidecar: Options.GracefulShutdownTimeout must not be negative, got %s", opts.GracefulShutdownTimeout)
	}
	opts = opts.withDefaults()
	return &Server{
		opts:        opts,
		log:         opts.Logger,
		controllers: map[string]*controller{},
		stopping:    make(chan struct{}),
	}, nil
}

// Name returns the sidecar's name, from Options.Name.
func (s *Server) Name() string { return s.opts.Name }

// Scheme returns the scheme the Server maps types to kinds with.
func (s *Server) Scheme() *runtime.Scheme { return s.opts.Scheme }

// register adds a controller; the builder calls it.
func (s *Server) register(c *controller) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving {
		return fmt.Errorf("controller %q: controllers must be registered before the server serves: the host reads them once, at start", c.desc.GetName())
	}
	name := c.desc.GetName()
	if _, ok := s.controllers[name]; ok {
		return fmt.Errorf("controller %q is already registered: give each controller a unique name with Named", name)
	}
	s.controllers[name] = c
	s.order = append(s.order, name)
	return nil
}

// controllerNames returns the registered controllers' names in registration
// order.
func (s *Server) controllerNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.order)
}

// Describe answers the host's handshake with the protocol version, the
// sidecar's name and its controllers, as registered. A host that speaks
// another protocol version is logged and answered all the same: the host
// decides whether it can work with this sidecar.
func (s *service) Describe(_ context.Context, req *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error) {
	log := s.log.WithValues("hostProtocolVersion", req.GetProtocolVersion(), "hostVersion", req.GetHostVersion())
	if req.GetProtocolVersion() != ProtocolVersion {
		log.Info("The host speaks another protocol version; answering anyway, the host decides", "protocolVersion", ProtocolVersion)
	}
	s.setClusterAddress(req.GetClusterAddress())
	s.mu.RLock()
	defer s.mu.RUnlock()
	resp := &polyopv1alpha1.DescribeResponse{
		ProtocolVersion: ProtocolVersion,
		Name:            s.opts.Name,
		SdkName:         SDKName,
		SdkVersion:      SDKVersion,
		Controllers:     make([]*polyopv1alpha1.ControllerDescription, 0, len(s.order)),
		ReconcileStream: s.opts.reconcileStream(),
	}
	for _, name := range s.order {
		resp.Controllers = append(resp.Controllers, proto.CloneOf(s.controllers[name].desc))
	}
	resp.Webhooks, resp.Conversions = s.admission.describe()
	for _, ix := range s.indexes {
		resp.Indexes = append(resp.Indexes, proto.CloneOf(ix))
	}
	for _, ck := range s.cachedKinds {
		resp.CachedKinds = append(resp.CachedKinds, proto.CloneOf(ck))
	}
	log.V(1).Info("Described the sidecar to the host", "controllers", s.order)
	return resp, nil
}

// Reconcile decodes the request's object into the controller's type, calls its
// Reconciler and answers with the decision, the status and the events.
//
// It answers with gRPC status NOT_FOUND for a controller that is not
// registered and INVALID_ARGUMENT for a request without a name or with an
// object that does not decode. Errors from the Reconciler, and panics, are
// not gRPC errors: they are reported in the response's error field, so that
// the host still writes the status and records the events.
func (s *service) Reconcile(ctx context.Context, in *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
	s.mu.RLock()
	c, ok := s.controllers[in.GetController()]
	s.mu.RUnlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "sidecar %q has no controller named %q; it has %q", s.opts.Name, in.GetController(), s.controllerNames())
	}
	if in.GetKey().GetName() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "controller %q: the request has no object name", in.GetController())
	}

	kind := c.gvk
	if k := in.GetKind(); k.GetKind() != "" {
		kind = schema.GroupVersionKind{Group: k.GetGroup(), Version: k.GetVersion(), Kind: k.GetKind()}
	}
	req := Request{
		Controller: in.GetController(),
		Kind:       kind,
		NamespacedName: types.NamespacedName{
			Namespace: in.GetKey().GetNamespace(),
			Name:      in.GetKey().GetName(),
		},
		Retries: int(in.GetRetries()),
	}
	log := s.log.WithValues("controller", req.Controller, "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name)
	if req.Retries > 0 {
		log = log.WithValues("retries", req.Retries)
	}
	ctx = withCallLogger(ctx, log)
	ctx = withRequest(ctx, req)
	ctx = cacheversions.With(ctx, in.GetCacheVersions())
	annotateSpan(ctx, req)
	ctx, state := s.withReconcileState(ctx, c, req, in.GetObservedChildren())
	resp, err := state.respond(c.reconcile(ctx, req, in.GetObject()))
	recordResult(ctx, resp, err)
	return resp, err
}
