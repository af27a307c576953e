package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Create implements polyopv1alpha1.ClusterServiceServer.
func (s *Server) Create(ctx context.Context, req *polyopv1alpha1.CreateRequest) (*polyopv1alpha1.CreateResponse, error) {
	var (
		obj *unstructured.Unstructured
		ri  dynamic.ResourceInterface
		err error
	)
	if err := noForce("a Create", req.GetOptions()); err != nil {
		return nil, err
	}
	if req.GetSubresource() == "" {
		obj, ri, err = s.decode("create", req.GetKind(), req.GetKey(), req.GetObject(), false)
	} else {
		obj, ri, err = s.decodeSubresourceBody(req)
	}
	if err != nil {
		return nil, err
	}
	out, err := ri.Create(ctx, obj, metav1.CreateOptions{
		DryRun:       dryRun(req.GetOptions()),
		FieldManager: s.fieldManager(req.GetOptions()),
	}, subresources(req.GetSubresource())...)
	if err != nil {
		return nil, toStatus(err)
	}
	raw, err := out.MarshalJSON()
	if err != nil {
		return nil, toStatus(err)
	}
	return &polyopv1alpha1.CreateResponse{Object: raw}, nil
}

// Update implements polyopv1alpha1.ClusterServiceServer.
func (s *Server) Update(ctx context.Context, req *polyopv1alpha1.UpdateRequest) (*polyopv1alpha1.UpdateResponse, error) {
	if err := noForce("an Update", req.GetOptions()); err != nil {
		return nil, err
	}
	verb := "update"
	if sub := req.GetSubresource(); sub != "" {
		verb = "update the " + sub + " subresource of"
	}
	obj, ri, err := s.decode(verb, req.GetKind(), req.GetKey(), req.GetObject(), true)
	if err != nil {
		return nil, err
	}
	out, err := ri.Update(ctx, obj, metav1.UpdateOptions{
		DryRun:       dryRun(req.GetOptions()),
		FieldManager: s.fieldManager(req.GetOptions()),
	}, subresources(req.GetSubresource())...)
	if err != nil {
		return nil, toStatus(err)
	}
	raw, err := out.MarshalJSON()
	if err != nil {
		return nil, toStatus(err)
	}
	return &polyopv1alpha1.UpdateResponse{Object: raw}, nil
}

// patchTypes maps the protocol's patch types onto the API server's.
var patchTypes = map[polyopv1alpha1.PatchType]types.PatchType{
	polyopv1alpha1.PatchType_PATCH_TYPE_MERGE:           types.MergePatchType,
	polyopv1alpha1.PatchType_PATCH_TYPE_JSON:            types.JSONPatchType,
	polyopv1alpha1.PatchType_PATCH_TYPE_STRATEGIC_MERGE: types.StrategicMergePatchType,
	polyopv1alpha1.PatchType_PATCH_TYPE_APPLY:           types.ApplyPatchType,
}

// Patch implements polyopv1alpha1.ClusterServiceServer.
func (s *Server) Patch(ctx context.Context, req *polyopv1alpha1.PatchRequest) (*polyopv1alpha1.PatchResponse, error) {
	m, err := s.mapping(req.GetKind())
	if err != nil {
		return nil, err
	}
	key, err := objectKey(m, req.GetKey())
	if err != nil {
		return nil, err
	}
	verb := "patch"
	if sub := req.GetSubresource(); sub != "" {
		verb = "patch the " + sub + " subresource of"
	}
	if err := s.allowWrite(verb, m, key.Namespace, key.Name); err != nil {
		return nil, err
	}
	pt, ok := patchTypes[req.GetType()]
	if !ok {
		return nil, invalid("type: unknown patch type %s", req.GetType())
	}
	if len(req.GetPatch()) == 0 {
		return nil, invalid("patch is required")
	}
	opts := metav1.PatchOptions{
		DryRun:       dryRun(req.GetOptions()),
		FieldManager: s.fieldManager(req.GetOptions()),
	}
	if req.GetOptions().GetForce() {
		if pt != types.ApplyPatchType {
			return nil, invalid("options.force is server-side apply's: it needs type PATCH_TYPE_APPLY, not %s", req.GetType())
		}
		force := true
		opts.Force = &force
	}
	out, err := s.resource(m, key.Namespace).Patch(ctx, key.Name, pt, req.GetPatch(), opts, subresources(req.GetSubresource())...)
	if err != nil {
		return nil, toStatus(err)
	}
	raw, err := out.MarshalJSON()
	if err != nil {
		return nil, toStatus(err)
	}
	return &polyopv1alpha1.PatchResponse{Object: raw}, nil
}

// propagations maps the protocol's propagation policies onto the API server's.
var propagations = map[polyopv1alpha1.DeletePropagation]metav1.DeletionPropagation{
	polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_BACKGROUND: metav1.DeletePropagationBackground,
	polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_FOREGROUND: metav1.DeletePropagationForeground,
	polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_ORPHAN:     metav1.DeletePropagationOrphan,
}

// Delete implements polyopv1alpha1.ClusterServiceServer.
func (s *Server) Delete(ctx context.Context, req *polyopv1alpha1.DeleteRequest) (*polyopv1alpha1.DeleteResponse, error) {
	if err := noForce("a Delete", req.GetOptions()); err != nil {
		return nil, err
	}
	m, err := s.mapping(req.GetKind())
	if err != nil {
		return nil, err
	}
	key, err := objectKey(m, req.GetKey())
	if err != nil {
		return nil, err
	}
	if err := s.allowWrite("delete", m, key.Namespace, key.Name); err != nil {
		return nil, err
	}
	opts := metav1.DeleteOptions{
		DryRun:             dryRun(req.GetOptions()),
		GracePeriodSeconds: req.GracePeriodSeconds,
	}
	if req.GetPropagation() != polyopv1alpha1.DeletePropagation_DELETE_PROPAGATION_UNSPECIFIED {
		p, ok := propagations[req.GetPropagation()]
		if !ok {
			return nil, invalid("propagation: unknown propagation policy %s", req.GetPropagation())
		}
		opts.PropagationPolicy = &p
	}
	if uid, rv := req.GetPreconditionUid(), req.GetPreconditionResourceVersion(); uid != "" || rv != "" {
		opts.Preconditions = &metav1.Preconditions{}
		if uid != "" {
			u := types.UID(uid)
			opts.Preconditions.UID = &u
		}
		if rv != "" {
			opts.Preconditions.ResourceVersion = &rv
		}
	}
	if err := s.resource(m, key.Namespace).Delete(ctx, key.Name, opts); err != nil {
		return nil, toStatus(err)
	}
	return &polyopv1alpha1.DeleteResponse{}, nil
}

// RecordEvent implements polyopv1alpha1.ClusterServiceServer. It reads the
// object (from the cache, for a kind the host caches) so that the event names
// its UID, as kubectl describe expects.
func (s *Server) RecordEvent(ctx context.Context, req *polyopv1alpha1.RecordEventRequest) (*polyopv1alpha1.RecordEventResponse, error) {
	e := req.GetEvent()
	if e.GetReason() == "" {
		return nil, invalid("event.reason is required")
	}
	m, err := s.mapping(req.GetKind())
	if err != nil {
		return nil, err
	}
	// The event is written, not the object it is about: its kind need not be
	// one the description names (the Get below reads it as any read).
	if err := s.allowNamespace("record an event", m, req.GetKey().GetNamespace(), req.GetKey().GetName()); err != nil {
		return nil, err
	}
	got, err := s.Get(ctx, &polyopv1alpha1.GetRequest{Kind: req.GetKind(), Key: req.GetKey()})
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(got.GetObject()); err != nil {
		return nil, toStatus(err)
	}
	eventType := corev1.EventTypeNormal
	if e.GetType() == polyopv1alpha1.EventType_EVENT_TYPE_WARNING {
		eventType = corev1.EventTypeWarning
	}
	action := e.GetAction()
	if action == "" {
		action = e.GetReason()
	}
	s.clients.Recorder.Eventf(obj, nil, eventType, e.GetReason(), action, "%s", e.GetMessage())
	return &polyopv1alpha1.RecordEventResponse{}, nil
}

// decode parses the whole object of a create or an update (verb), which kind
// and key address, and finds the resource it is written to, in a namespace the
// server writes in. The object's apiVersion, kind, metadata.namespace and
// metadata.name default to kind's and key's; an object that names another is
// refused, naming both. An update needs a name; a create may leave it out for
// the object's metadata.generateName.
func (s *Server) decode(verb string, kind *polyopv1alpha1.GroupVersionKind, key *polyopv1alpha1.ObjectKey, raw []byte, needName bool) (*unstructured.Unstructured, dynamic.ResourceInterface, error) {
	m, err := s.mapping(kind)
	if err != nil {
		return nil, nil, err
	}
	if len(raw) == 0 {
		return nil, nil, invalid("object is required")
	}
	obj := &unstructured.Unstructured{}
	// The API machinery's JSON decoding keeps integers as int64.
	if err := utiljson.Unmarshal(raw, &obj.Object); err != nil || obj.Object == nil {
		return nil, nil, invalid("object is not a JSON object: %v", err)
	}
	gvk := m.GroupVersionKind
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced && key.GetNamespace() == "" {
		return nil, nil, invalid("key.namespace is required: %s is namespaced", gvk.Kind)
	}
	fields := []addressField{
		{"apiVersion", "kind.group and kind.version", gvk.GroupVersion().String(), obj.GetAPIVersion, obj.SetAPIVersion},
		{"kind", "kind.kind", gvk.Kind, obj.GetKind, obj.SetKind},
		{"metadata.name", "key.name", key.GetName(), obj.GetName, obj.SetName},
	}
	namespace := ""
	if namespaced {
		namespace = key.GetNamespace()
		fields = append(fields, addressField{"metadata.namespace", "key.namespace", namespace, obj.GetNamespace, obj.SetNamespace})
	}
	for _, f := range fields {
		if err := f.fill(); err != nil {
			return nil, nil, err
		}
	}
	if key.GetName() == "" && (needName || obj.GetGenerateName() == "") {
		if needName {
			return nil, nil, invalid("key.name is required")
		}
		return nil, nil, invalid("key.name is required, unless the object sets metadata.generateName")
	}
	name := obj.GetName()
	if name == "" {
		name = obj.GetGenerateName()
	}
	if err := s.allowWrite(verb, m, namespace, name); err != nil {
		return nil, nil, err
	}
	return obj, s.resource(m, namespace), nil
}

// addressField is a field of a written object that its request's kind or key
// also says.
type addressField struct {
	field, from string // the object's field, and the request's
	want        string // the request's value
	get         func() string
	set         func(string)
}

// fill gives the object the request's value when it has none, and refuses an
// object whose value differs. An empty value in the request (a create's name,
// left to generateName) leaves the object's alone.
func (f addressField) fill() error {
	switch got := f.get(); {
	case got == "":
		if f.want != "" {
			f.set(f.want)
		}
	case f.want == "":
		return invalid("object's %s is %q, but the request's %s is empty: set %s, or leave %s out of the object",
			f.field, got, f.from, f.from, f.field)
	case got != f.want:
		return invalid("object's %s is %q, but the request's %s says %q: they must agree (or leave %s out of the object)",
			f.field, got, f.from, f.want, f.field)
	}
	return nil
}

// noForce refuses WriteOptions.force on a write other than an apply patch.
func noForce(call string, o *polyopv1alpha1.WriteOptions) error {
	if o.GetForce() {
		return invalid("options.force is server-side apply's: only a Patch of type PATCH_TYPE_APPLY takes it, not %s", call)
	}
	return nil
}

// decodeSubresourceBody decodes the body of a subresource create and returns
// the client of the resource of the object it belongs to, which the request's
// kind and key name. The dynamic client posts to the URL of the body's name,
// so the body is given that object's namespace and name, and refused when it
// names another object.
func (s *Server) decodeSubresourceBody(req *polyopv1alpha1.CreateRequest) (*unstructured.Unstructured, dynamic.ResourceInterface, error) {
	if req.GetKind() == nil || req.GetKey() == nil {
		return nil, nil, invalid("creating the %q subresource needs kind and key: the object it belongs to", req.GetSubresource())
	}
	m, err := s.mapping(req.GetKind())
	if err != nil {
		return nil, nil, err
	}
	key, err := objectKey(m, req.GetKey())
	if err != nil {
		return nil, nil, err
	}
	if err := s.allowWrite("create the "+req.GetSubresource()+" subresource", m, key.Namespace, key.Name); err != nil {
		return nil, nil, err
	}
	if len(req.GetObject()) == 0 {
		return nil, nil, invalid("object is required: the %q subresource's body", req.GetSubresource())
	}
	body := &unstructured.Unstructured{}
	if err := body.UnmarshalJSON(req.GetObject()); err != nil {
		return nil, nil, invalid("object is not the %q subresource's body as JSON (with apiVersion and kind): %v", req.GetSubresource(), err)
	}
	for _, f := range []struct{ what, got, want string }{
		{"metadata.name", body.GetName(), key.Name},
		{"metadata.namespace", body.GetNamespace(), key.Namespace},
	} {
		if f.got != "" && f.got != f.want {
			return nil, nil, invalid("object's %s is %q, but the subresource belongs to %s %s (the request's kind and key)", f.what, f.got, m.GroupVersionKind.Kind, keyName(key.Namespace, key.Name))
		}
	}
	body.SetName(key.Name)
	if key.Namespace != "" {
		body.SetNamespace(key.Namespace)
	}
	return body, s.resource(m, key.Namespace), nil
}

// resource is the dynamic client of the mapped resource, in namespace for a
// namespaced kind.
func (s *Server) resource(m *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	r := s.clients.Dynamic.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.Namespace(namespace)
	}
	return r
}

func dryRun(o *polyopv1alpha1.WriteOptions) []string {
	if o.GetDryRun() {
		return []string{metav1.DryRunAll}
	}
	return nil
}

func subresources(name string) []string {
	if name == "" {
		return nil
	}
	return []string{name}
}
