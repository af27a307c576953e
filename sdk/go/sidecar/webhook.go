package sidecar

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// FailurePolicy is what the API server does when the webhook cannot answer:
// the host cannot reach the sidecar in time, or the sidecar fails.
type FailurePolicy = polyopv1alpha1.FailurePolicy

const (
	// Fail refuses the request, with a message naming the sidecar and the
	// reason. The default.
	Fail FailurePolicy = polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL
	// Ignore lets the request through, with a warning saying why.
	Ignore FailurePolicy = polyopv1alpha1.FailurePolicy_FAILURE_POLICY_IGNORE
)

// Operation is an admission operation a webhook admits.
type Operation = polyopv1alpha1.Operation

const (
	// Create is the creation of an object.
	Create Operation = polyopv1alpha1.Operation_OPERATION_CREATE
	// Update is an update of an object.
	Update Operation = polyopv1alpha1.Operation_OPERATION_UPDATE
	// Delete is the deletion of an object; only validators see it.
	Delete Operation = polyopv1alpha1.Operation_OPERATION_DELETE
	// Connect is a connect subresource call (such as pods/exec).
	Connect Operation = polyopv1alpha1.Operation_OPERATION_CONNECT
)

// WebhookBuilder builds the admission webhooks and the conversion of objects
// of type T and registers them on a Server, as controller-runtime's
// builder.WebhookManagedBy does on a manager. Create one with
// NewWebhookManagedBy; Complete registers it.
type WebhookBuilder[T client.Object] struct {
	srv            *Server
	forObject      T
	forSet         bool
	defaulter      Defaulter[T]
	validator      Validator[T]
	converter      func(*runtime.Scheme) (conversion.Converter, error)
	failurePolicy  FailurePolicy
	operations     []Operation
	timeoutSeconds int32
	resource       string
}

// NewWebhookManagedBy returns a WebhookBuilder for the webhooks of objects of
// type T, a pointer to a struct registered in the Server's scheme:
//
//	err := sidecar.NewWebhookManagedBy[*v1.MaintenanceWindow](srv).
//		WithDefaulter(&MaintenanceWindowDefaulter{}).
//		WithValidator(&MaintenanceWindowValidator{}).
//		WithOperations(sidecar.Create, sidecar.Update, sidecar.Delete).
//		Complete()
//
// The webhooks receive objects at T's version; the API server converts
// objects written at other versions first. When T's kind has other versions
// in the scheme and they convert through a hub (controller-runtime's
// conversion.Hub and conversion.Convertible, see Hub), or WithConverter is
// given, Complete also registers the kind's conversion.
func NewWebhookManagedBy[T client.Object](srv *Server) *WebhookBuilder[T] {
	return &WebhookBuilder[T]{srv: srv}
}

// For sets the prototype of the admitted objects. It is optional for a type
// registered in the scheme; for *unstructured.Unstructured it is required,
// with the apiVersion and kind set.
func (b *WebhookBuilder[T]) For(obj T) *WebhookBuilder[T] {
	b.forObject = obj
	b.forSet = true
	return b
}

// WithDefaulter serves a mutating webhook that calls d.
func (b *WebhookBuilder[T]) WithDefaulter(d Defaulter[T]) *WebhookBuilder[T] {
	b.defaulter = d
	return b
}

// WithValidator serves a validating webhook that calls v.
func (b *WebhookBuilder[T]) WithValidator(v Validator[T]) *WebhookBuilder[T] {
	b.validator = v
	return b
}

// WithConverter converts the kind's versions with the converter the
// constructor builds from the Server's scheme, for example
// conversion.NewHubSpokeConverter (sigs.k8s.io/controller-runtime/pkg/webhook/conversion),
// instead of the types' own Hub and Convertible methods.
func (b *WebhookBuilder[T]) WithConverter(constructor func(*runtime.Scheme) (conversion.Converter, error)) *WebhookBuilder[T] {
	b.converter = constructor
	return b
}

// WithFailurePolicy sets what the API server does when the webhooks cannot
// answer. Defaults to Fail.
func (b *WebhookBuilder[T]) WithFailurePolicy(p FailurePolicy) *WebhookBuilder[T] {
	b.failurePolicy = p
	return b
}

// WithOperations sets the operations that reach the webhooks. Calls add to
// the list. Defaults to Create and Update; add Delete for a validator whose
// ValidateDelete must run. The defaulter never sees deletes.
func (b *WebhookBuilder[T]) WithOperations(ops ...Operation) *WebhookBuilder[T] {
	b.operations = append(b.operations, ops...)
	return b
}

// WithTimeoutSeconds sets the API server's timeout for each webhook call,
// 1 to 30 seconds; the host answers within it. Defaults to 10.
func (b *WebhookBuilder[T]) WithTimeoutSeconds(seconds int32) *WebhookBuilder[T] {
	b.timeoutSeconds = seconds
	return b
}

// WithResource sets the kind's resource (plural, lower case), for the
// webhook configurations `host webhooks` prints. Defaults to the plural the
// host finds through discovery, and that `host webhooks` guesses from the
// kind.
func (b *WebhookBuilder[T]) WithResource(resource string) *WebhookBuilder[T] {
	b.resource = resource
	return b
}

// Complete registers the webhooks, and the conversion, on the Server. It
// fails if the type is not in the scheme, nothing is to be registered, a
// setting is invalid, the kind's version already has webhooks, or the Server
// already serves. The builders of several versions of a kind that converts
// through a hub register its conversion once; a converter given with
// WithConverter is the kind's only one.
func (b *WebhookBuilder[T]) Complete() error {
	if err := b.complete(); err != nil {
		return fmt.Errorf("sidecar: registering the webhooks for %s: %w", reflect.TypeFor[T](), err)
	}
	return nil
}

func (b *WebhookBuilder[T]) complete() error {
	if b.srv == nil {
		return errors.New("the server is nil")
	}
	typ := reflect.TypeFor[T]()
	if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("the type must be a pointer to a struct, such as *v1.ConfigMap; got %s", typ)
	}
	prototype := b.forObject
	if !b.forSet || reflect.ValueOf(prototype).IsNil() {
		prototype = reflect.New(typ.Elem()).Interface().(T)
	}
	scheme := b.srv.Scheme()
	gvk, err := apiutil.GVKForObject(prototype, scheme)
	if err != nil {
		return fmt.Errorf("finding its kind (add the type to Options.Scheme, or pass For an object with its apiVersion and kind): %w", err)
	}

	var conv *conversionRegistration
	switch {
	case b.converter != nil:
		converter, err := b.converter(scheme)
		if err != nil {
			return fmt.Errorf("building the converter: %w", err)
		}
		conv = &conversionRegistration{gk: gvk.GroupKind(), converter: converter}
	case !isUnstructured(prototype):
		ok, err := conversion.IsConvertible(scheme, prototype)
		if err != nil {
			return fmt.Errorf("checking whether its versions convert: %w", err)
		}
		if ok {
			conv = &conversionRegistration{gk: gvk.GroupKind()}
		}
	}
	if conv != nil {
		conv.versions = versionsOf(scheme, gvk.GroupKind())
		if len(conv.versions) < 2 {
			return fmt.Errorf("a converter for %s, which has one version in the scheme", gvk.GroupKind())
		}
	}

	var wh *webhookRegistration
	if b.defaulter != nil || b.validator != nil {
		desc, err := b.describe(gvk)
		if err != nil {
			return err
		}
		typed := &typedWebhook[T]{gvk: gvk, elem: typ.Elem(), defaulter: b.defaulter, validator: b.validator}
		wh = &webhookRegistration{gvk: gvk, desc: desc}
		if b.defaulter != nil {
			wh.defaultFn = typed.defaultObject
		}
		if b.validator != nil {
			wh.validateFn = typed.validate
		}
	}
	if wh == nil && conv == nil {
		return errors.New("nothing to register: give WithDefaulter, WithValidator or WithConverter, or make the kind's versions convert through a hub")
	}
	return b.srv.registerAdmission(wh, conv)
}

// describe builds the WebhookDescription, checking the settings.
func (b *WebhookBuilder[T]) describe(gvk schema.GroupVersionKind) (*polyopv1alpha1.WebhookDescription, error) {
	switch b.failurePolicy {
	case polyopv1alpha1.FailurePolicy_FAILURE_POLICY_UNSPECIFIED, Fail, Ignore:
	default:
		return nil, fmt.Errorf("%v is not a failure policy", b.failurePolicy)
	}
	var ops []Operation
	for _, op := range b.operations {
		if _, known := polyopv1alpha1.Operation_name[int32(op)]; !known || op == polyopv1alpha1.Operation_OPERATION_UNSPECIFIED {
			return nil, fmt.Errorf("%v is not an operation", op)
		}
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	if b.timeoutSeconds != 0 && (b.timeoutSeconds < 1 || b.timeoutSeconds > 30) {
		return nil, fmt.Errorf("the timeout must be between 1 and 30 seconds, got %d", b.timeoutSeconds)
	}
	return &polyopv1alpha1.WebhookDescription{
		Kind:           &polyopv1alpha1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:       b.resource,
		Default:        b.defaulter != nil,
		Validate:       b.validator != nil,
		Operations:     ops,
		FailurePolicy:  b.failurePolicy,
		TimeoutSeconds: b.timeoutSeconds,
	}, nil
}

// versionsOf lists the versions of a kind in the scheme, sorted.
func versionsOf(scheme *runtime.Scheme, gk schema.GroupKind) []string {
	var versions []string
	for gvk := range scheme.AllKnownTypes() {
		if gvk.GroupKind() == gk && !slices.Contains(versions, gvk.Version) {
			versions = append(versions, gvk.Version)
		}
	}
	slices.Sort(versions)
	return versions
}

// admissionRegistry holds a Server's webhooks and conversions; the Server's
// mutex guards it.
type admissionRegistry struct {
	webhooks     map[schema.GroupVersionKind]*webhookRegistration
	webhookOrder []schema.GroupVersionKind
	conversions  map[schema.GroupKind]*conversionRegistration
	convOrder    []schema.GroupKind
}

// webhookRegistration is the webhooks of one kind.
type webhookRegistration struct {
	gvk        schema.GroupVersionKind
	desc       *polyopv1alpha1.WebhookDescription
	defaultFn  func(context.Context, *polyopv1alpha1.AdmissionRequest) (*polyopv1alpha1.DefaultResponse, error)
	validateFn func(context.Context, *polyopv1alpha1.AdmissionRequest) (*polyopv1alpha1.ValidateResponse, error)
}

// conversionRegistration is the conversion of one kind.
type conversionRegistration struct {
	gk       schema.GroupKind
	versions []string
	// converter converts; nil converts through the types' Hub and
	// Convertible methods.
	converter conversion.Converter
}

// registerAdmission adds a kind's webhooks and conversion (either may be
// nil); the WebhookBuilder calls it.
func (s *Server) registerAdmission(wh *webhookRegistration, conv *conversionRegistration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving {
		return errors.New("webhooks must be registered before the server serves: the host reads them once, at start")
	}
	r := &s.admission
	if wh != nil {
		if _, dup := r.webhooks[wh.gvk]; dup {
			return fmt.Errorf("%s already has webhooks: register its defaulter and validator with one builder", wh.gvk)
		}
	}
	if conv != nil {
		if prev, dup := r.conversions[conv.gk]; dup {
			if prev.converter != nil || conv.converter != nil {
				return fmt.Errorf("%s already has a conversion", conv.gk)
			}
			// The builders of several versions of a kind whose versions
			// convert through a hub each find the same conversion, as in
			// a kubebuilder project where every version has webhooks:
			// it is registered once.
			conv = nil
		}
	}
	if wh != nil {
		if r.webhooks == nil {
			r.webhooks = map[schema.GroupVersionKind]*webhookRegistration{}
		}
		r.webhooks[wh.gvk] = wh
		r.webhookOrder = append(r.webhookOrder, wh.gvk)
	}
	if conv != nil {
		if r.conversions == nil {
			r.conversions = map[schema.GroupKind]*conversionRegistration{}
		}
		r.conversions[conv.gk] = conv
		r.convOrder = append(r.convOrder, conv.gk)
	}
	return nil
}

// empty reports whether nothing is registered.
func (r *admissionRegistry) empty() bool {
	return len(r.webhooks) == 0 && len(r.conversions) == 0
}

// describe returns what Describe says about the webhooks and conversions, in
// registration order.
func (r *admissionRegistry) describe() ([]*polyopv1alpha1.WebhookDescription, []*polyopv1alpha1.ConversionDescription) {
	var webhooks []*polyopv1alpha1.WebhookDescription
	for _, gvk := range r.webhookOrder {
		webhooks = append(webhooks, cloneWebhookDescription(r.webhooks[gvk].desc))
	}
	var conversions []*polyopv1alpha1.ConversionDescription
	for _, gk := range r.convOrder {
		c := r.conversions[gk]
		conversions = append(conversions, &polyopv1alpha1.ConversionDescription{
			Kind:     &polyopv1alpha1.GroupKind{Group: gk.Group, Kind: gk.Kind},
			Versions: slices.Clone(c.versions),
		})
	}
	return webhooks, conversions
}

func cloneWebhookDescription(d *polyopv1alpha1.WebhookDescription) *polyopv1alpha1.WebhookDescription {
	return proto.CloneOf(d)
}

func isUnstructured(obj any) bool {
	_, ok := obj.(runtime.Unstructured)
	return ok
}
