package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/polyop/polyop/sdk/go/client"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// fakeCluster is a Cluster service over controller-runtime's fake client: it
// stores unstructured objects, answers API errors as the host does (a gRPC
// code and an APIError detail with the metav1.Status) and keeps every request
// it received.
type fakeCluster struct {
	polyopv1alpha1.UnimplementedClusterServiceServer

	store   ctrlclient.Client
	mapper  meta.RESTMapper
	address string

	mu       sync.Mutex
	requests []proto.Message
	// next, when set, is returned by the next call instead of its answer.
	next error
	// source is the read source the fake reports.
	source polyopv1alpha1.ReadSource
}

// newFakeCluster serves a fakeCluster holding objs on a unix socket and
// returns it with a Client dialing it by address.
func newFakeCluster(t *testing.T, objs ...ctrlclient.Object) (*fakeCluster, *client.Client) {
	t.Helper()
	f := &fakeCluster{
		store: fake.NewClientBuilder().
			WithScheme(clientgoscheme.Scheme).
			WithObjects(objs...).
			WithStatusSubresource(&appsv1.Deployment{}).
			Build(),
		source: polyopv1alpha1.ReadSource_READ_SOURCE_CACHE,
	}
	f.mapper = testrestmapper.TestOnlyStaticRESTMapper(clientgoscheme.Scheme)

	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "pc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "cluster.sock")
	f.address = "unix://" + socket
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	polyopv1alpha1.RegisterClusterServiceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	c, err := client.New(client.Options{Address: f.address})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return f, c
}

// mustDial returns a connection of its own to f.
func mustDial(t *testing.T, f *fakeCluster) *grpc.ClientConn {
	t.Helper()
	target, err := client.Target(f.address)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// failNext makes the next call answer err.
func (f *fakeCluster) failNext(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = err
}

// received records req and returns the error to answer instead, if any.
func (f *fakeCluster) received(req proto.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, proto.Clone(req))
	err := f.next
	f.next = nil
	return err
}

// last returns the last request of type M.
func last[M proto.Message](t *testing.T, f *fakeCluster) M {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.requests) - 1; i >= 0; i-- {
		if m, ok := f.requests[i].(M); ok {
			return m
		}
	}
	var zero M
	t.Fatalf("the Cluster service received no %T", zero)
	return zero
}

// count returns how many requests of type M the fake received.
func count[M proto.Message](f *fakeCluster) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if _, ok := r.(M); ok {
			n++
		}
	}
	return n
}

// apiError turns an error of the fake client into the host's answer.
func apiError(err error) error {
	var apiStatus apierrors.APIStatus
	if !errors.As(err, &apiStatus) {
		return status.Error(codes.Internal, err.Error())
	}
	s := apiStatus.Status()
	data, _ := json.Marshal(s)
	code := codes.Unknown
	switch {
	case apierrors.IsNotFound(err):
		code = codes.NotFound
	case apierrors.IsAlreadyExists(err):
		code = codes.AlreadyExists
	case apierrors.IsConflict(err):
		code = codes.Aborted
	case apierrors.IsInvalid(err):
		code = codes.InvalidArgument
	case apierrors.IsForbidden(err):
		code = codes.PermissionDenied
	case apierrors.IsBadRequest(err):
		code = codes.FailedPrecondition
	}
	st, _ := status.New(code, s.Message).WithDetails(&polyopv1alpha1.APIError{Status: data})
	return st.Err()
}

func gvkOf(k *polyopv1alpha1.GroupVersionKind) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.GetGroup(), Version: k.GetVersion(), Kind: k.GetKind()}
}

func writeOpts(o *polyopv1alpha1.WriteOptions) (dryRun []string, fieldManager string) {
	if o.GetDryRun() {
		dryRun = []string{metav1.DryRunAll}
	}
	return dryRun, o.GetFieldManager()
}

func (f *fakeCluster) Get(ctx context.Context, req *polyopv1alpha1.GetRequest) (*polyopv1alpha1.GetResponse, error) {
	if err := f.received(req); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvkOf(req.GetKind()))
	key := types.NamespacedName{Namespace: req.GetKey().GetNamespace(), Name: req.GetKey().GetName()}
	if err := f.store.Get(ctx, key, u); err != nil {
		return nil, apiError(err)
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	source := f.source
	if req.GetOptions().GetUncached() {
		source = polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER
	}
	return &polyopv1alpha1.GetResponse{Object: data, Source: source}, nil
}

func (f *fakeCluster) List(ctx context.Context, req *polyopv1alpha1.ListRequest) (*polyopv1alpha1.ListResponse, error) {
	if err := f.received(req); err != nil {
		return nil, err
	}
	gvk := gvkOf(req.GetKind())
	ul := &unstructured.UnstructuredList{}
	ul.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	opts := []ctrlclient.ListOption{ctrlclient.InNamespace(req.GetNamespace())}
	if s := req.GetLabelSelector(); s != "" {
		sel, err := labels.Parse(s)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		opts = append(opts, ctrlclient.MatchingLabelsSelector{Selector: sel})
	}
	// The fake client selects by indexed fields only; the name is all the
	// tests need.
	name, byName := "", false
	if s := req.GetFieldSelector(); s != "" {
		sel, err := fields.ParseSelector(s)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		if name, byName = sel.RequiresExactMatch("metadata.name"); !byName {
			return nil, status.Error(codes.InvalidArgument, "the fake selects by metadata.name only")
		}
	}
	if err := f.store.List(ctx, ul, opts...); err != nil {
		return nil, apiError(err)
	}
	// The fake client gives lists no resource version; the API server does.
	resp := &polyopv1alpha1.ListResponse{ResourceVersion: "1000", Source: f.source}
	if req.GetOptions().GetUncached() {
		resp.Source = polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER
	}
	for i := range ul.Items {
		if byName && ul.Items[i].GetName() != name {
			continue
		}
		ul.Items[i].SetGroupVersionKind(gvk)
		data, _ := ul.Items[i].MarshalJSON()
		resp.Items = append(resp.Items, data)
	}
	return resp, nil
}

func (f *fakeCluster) Create(ctx context.Context, req *polyopv1alpha1.CreateRequest) (*polyopv1alpha1.CreateResponse, error) {
	if err := f.received(req); err != nil {
		return nil, err
	}
	if req.GetSubresource() != "" {
		return f.createSubresource(ctx, req)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(req.GetObject()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := addressed(req.GetKind(), req.GetKey(), u); err != nil {
		return nil, err
	}
	dryRun, manager := writeOpts(req.GetOptions())
	if err := f.store.Create(ctx, u, &ctrlclient.CreateOptions{DryRun: dryRun, FieldManager: manager}); err != nil {
		return nil, apiError(err)
	}
	data, _ := u.MarshalJSON()
	return &polyopv1alpha1.CreateResponse{Object: data}, nil
}

// createSubresource evicts a pod as the API server does, deleting it and
// answering a Status; the fake has no other subresource.
func (f *fakeCluster) createSubresource(ctx context.Context, req *polyopv1alpha1.CreateRequest) (*polyopv1alpha1.CreateResponse, error) {
	if req.GetSubresource() != "eviction" || req.GetKind().GetKind() != "Pod" {
		return nil, status.Errorf(codes.Unimplemented, "the fake cannot create the %s of a %s", req.GetSubresource(), req.GetKind().GetKind())
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: req.GetKey().GetNamespace(), Name: req.GetKey().GetName()}}
	if err := f.store.Delete(ctx, pod); err != nil {
		return nil, apiError(err)
	}
	return &polyopv1alpha1.CreateResponse{Object: []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}`)}, nil
}

func (f *fakeCluster) Update(ctx context.Context, req *polyopv1alpha1.UpdateRequest) (*polyopv1alpha1.UpdateResponse, error) {
	if err := f.received(req); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(req.GetObject()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := addressed(req.GetKind(), req.GetKey(), u); err != nil {
		return nil, err
	}
	dryRun, manager := writeOpts(req.GetOptions())
	var err error
	switch req.GetSubresource() {
	case "":
		err = f.store.Update(ctx, u, &ctrlclient.UpdateOptions{DryRun: dryRun, FieldManager: manager})
	default:
		err = f.store.SubResource(req.GetSubresource()).Update(ctx, u,
			&ctrlclient.SubResourceUpdateOptions{UpdateOptions: ctrlclient.UpdateOptions{DryRun: dryRun, FieldManager: manager}})
	}
	if err != nil {
		return nil, apiError(err)
	}
	data, _ := u.MarshalJSON()
	return &polyopv1alpha1.UpdateResponse{Object: data}, nil
}

// addressed checks, as the host does, that a write's kind and key are set and
// name the object its body is.
func addressed(kind *polyopv1alpha1.GroupVersionKind, key *polyopv1alpha1.ObjectKey, body *unstructured.Unstructured) error {
	if kind.GetKind() == "" || kind.GetVersion() == "" {
		return status.Error(codes.InvalidArgument, "the request has no kind")
	}
	if gvkOf(kind) != body.GroupVersionKind() {
		return status.Errorf(codes.InvalidArgument, "the request is for a %v, its object is a %v", gvkOf(kind), body.GroupVersionKind())
	}
	if key.GetNamespace() != body.GetNamespace() || key.GetName() != body.GetName() {
		return status.Errorf(codes.InvalidArgument, "the request is for %s/%s, its object is %s/%s",
			key.GetNamespace(), key.GetName(), body.GetNamespace(), body.GetName())
	}
	return nil
}

var patchTypes = map[polyopv1alpha1.PatchType]types.PatchType{
	polyopv1alpha1.PatchType_PATCH_TYPE_MERGE:           types.MergePatchType,
	polyopv1alpha1.PatchType_PATCH_TYPE_JSON:            types.JSONPatchType,
	polyopv1alpha1.PatchType_PATCH_TYPE_STRATEGIC_MERGE: types.StrategicMergePatchType,
	polyopv1alpha1.PatchType_PATCH_TYPE_APPLY:           types.ApplyPatchType,
}

func (f *fakeCluster) Patch(ctx context.Context, req *polyopv1alpha1.PatchRequest) (*polyopv1alpha1.PatchResponse, error) {
	if err := f.received(req); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvkOf(req.GetKind()))
	u.SetNamespace(req.GetKey().GetNamespace())
	u.SetName(req.GetKey().GetName())
	dryRun, manager := writeOpts(req.GetOptions())
	if manager == "" {
		manager = "polyop-test"
	}
	patch := ctrlclient.RawPatch(patchTypes[req.GetType()], req.GetPatch())
	opts := ctrlclient.PatchOptions{DryRun: dryRun, FieldManager: manager}
	if req.GetOptions().GetForce() {
		opts.Force = new(true)
	}
	var err error
	switch req.GetSubresource() {
	case "":
		err = f.store.Patch(ctx, u, patch, &opts)
	default:
		err = f.store.SubResource(req.GetSubresource()).Patch(ctx, u, patch, &ctrlclient.SubResourcePatchOptions{PatchOptions: opts})
	}
	if err != nil {
		return nil, apiError(err)
	}
	if req.GetType() == polyopv1alpha1.PatchType_PATCH_TYPE_APPLY && !req.GetOptions().GetDryRun() {
		// The fake client does not answer an apply with the stored object; the
		// API server does.
		if err := f.store.Get(ctx, ctrlclient.ObjectKeyFromObject(u), u); err != nil {
			return nil, apiError(err)
		}
		if u.GetResourceVersion() == "" {
			// Nor does it give objects it creates by apply a resource version.
			u.SetResourceVersion("1")
		}
	}
	data, _ := u.MarshalJSON()
	return &polyopv1alpha1.PatchResponse{Object: data}, nil
}

func (f *fakeCluster) Delete(ctx context.Context, req *polyopv1alpha1.DeleteRequest) (*polyopv1alpha1.DeleteResponse, error) {
	if err := f.received(req); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvkOf(req.GetKind()))
	u.SetNamespace(req.GetKey().GetNamespace())
	u.SetName(req.GetKey().GetName())
	dryRun, _ := writeOpts(req.GetOptions())
	if err := f.store.Delete(ctx, u, &ctrlclient.DeleteOptions{DryRun: dryRun}); err != nil {
		return nil, apiError(err)
	}
	return &polyopv1alpha1.DeleteResponse{}, nil
}

func (f *fakeCluster) RecordEvent(_ context.Context, req *polyopv1alpha1.RecordEventRequest) (*polyopv1alpha1.RecordEventResponse, error) {
	if err := f.received(req); err != nil {
		return nil, err
	}
	return &polyopv1alpha1.RecordEventResponse{}, nil
}

func (f *fakeCluster) ResolveKind(_ context.Context, req *polyopv1alpha1.ResolveKindRequest) (*polyopv1alpha1.ResolveKindResponse, error) {
	if err := f.received(req); err != nil {
		return nil, err
	}
	gvk := gvkOf(req.GetKind())
	var versions []string
	if gvk.Version != "" {
		versions = []string{gvk.Version}
	}
	mapping, err := f.mapper.RESTMapping(gvk.GroupKind(), versions...)
	if meta.IsNoMatchError(err) {
		return nil, status.Errorf(codes.NotFound, "the API server does not serve %s", gvk)
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	k := mapping.GroupVersionKind
	return &polyopv1alpha1.ResolveKindResponse{
		Kind:       &polyopv1alpha1.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind},
		Resource:   mapping.Resource.Resource,
		Namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace,
	}, nil
}
