package render

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/cluster"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/index"
	"github.com/polyop/polyop/internal/sidecarprocess"
)

// clusterSocketName is the name of the Cluster service's socket in render's
// temporary directory.
const clusterSocketName = "cluster.sock"

// Write is a write the sidecar made through the Cluster service polyop
// render serves it. It is recorded, not applied: reads after it still see
// the objects as they were given.
type Write struct {
	// Verb is create, update, patch, delete or event.
	Verb string `json:"verb"`
	// APIVersion and Kind are the written object's.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Name is the object's namespace/name, or name.
	Name string `json:"name"`
	// Subresource is the subresource written (status, scale), if any.
	Subresource string `json:"subresource,omitempty"`
	// PatchType is the patch's type: merge, json, strategic-merge or apply.
	PatchType string `json:"patchType,omitempty"`
	// Patch is the patch of a patch.
	Patch json.RawMessage `json:"patch,omitempty"`
	// Object is the object of a create or an update.
	Object json.RawMessage `json:"object,omitempty"`
	// Event is the event recorded, for verb event.
	Event *Event `json:"event,omitempty"`
}

// renderCluster is the Cluster service polyop render serves its sidecar: the
// host's own service (internal/cluster), reading the objects polyop render was
// given and recording the writes instead of applying them.
type renderCluster struct {
	// Address is where it serves: unix:// and a socket in its temporary
	// directory.
	Address string

	dir    string
	store  *objectStore
	mapper *lateMapper
	cancel context.CancelFunc
	done   chan struct{}
	stop   sync.Once

	mu     sync.Mutex
	writes []Write
}

// startRenderCluster serves an empty Cluster service on a unix socket in a
// temporary directory of its own. Give it its kinds and objects with
// setObjects before the sidecar reads through it; Stop it on every path.
func startRenderCluster() (*renderCluster, error) {
	dir, err := sidecarprocess.ShortTempDir("polyop-cluster-", clusterSocketName)
	if err != nil {
		return nil, err
	}
	c := &renderCluster{
		Address: "unix://" + filepath.Join(dir, clusterSocketName),
		dir:     dir,
		store:   &objectStore{},
		mapper:  &lateMapper{},
		done:    make(chan struct{}),
	}
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	dyn.PrependReactor("*", "*", c.record)
	srv := cluster.New(cluster.Clients{
		Cache:     c.store,
		APIReader: c.store,
		Dynamic:   dyn,
		Mapper:    c.mapper,
		Recorder:  &eventRecorder{c: c},
	}, cluster.Options{FieldManager: "polyop-render"})
	if err := srv.Listen(c.Address); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		_ = srv.Start(ctx)
	}()
	return c, nil
}

// setObjects gives the service the kinds it maps (mapper) and the objects it
// serves reads from.
func (c *renderCluster) setObjects(mapper meta.RESTMapper, objs []*unstructured.Unstructured) {
	c.mapper.set(mapper)
	c.store.set(objs)
}

// setIndexes gives the service the indexes the sidecar declares, which
// Lists select by as from the host's cache.
func (c *renderCluster) setIndexes(indexes []description.Index) {
	c.store.setIndexes(indexes)
}

// Writes are the writes recorded so far, in the order they were made.
func (c *renderCluster) Writes() []Write {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.writes)
}

// Stop stops serving and removes the socket and its directory. It may be
// called more than once.
func (c *renderCluster) Stop() {
	c.stop.Do(func() {
		c.cancel()
		<-c.done
		_ = os.RemoveAll(c.dir)
	})
}

func (c *renderCluster) add(w Write) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, w)
}

// record is the reactor of every action on the dynamic client: writes are
// recorded and answered as if they were applied; reads fall through to the
// fake client, which holds nothing (reads of objects go to the store).
func (c *renderCluster) record(a clienttesting.Action) (bool, runtime.Object, error) {
	gvk, err := c.mapper.KindFor(a.GetResource())
	if err != nil {
		return true, nil, err
	}
	ns := ""
	if a, ok := a.(interface{ GetNamespace() string }); ok {
		ns = a.GetNamespace()
	}
	w := Write{Verb: a.GetVerb(), APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Subresource: a.GetSubresource()}
	named := func(name string) string {
		if ns == "" {
			return name
		}
		return ns + "/" + name
	}
	switch a := a.(type) {
	case clienttesting.CreateActionImpl:
		return c.recordObject(w, a.GetObject(), named)
	case clienttesting.UpdateActionImpl:
		return c.recordObject(w, a.GetObject(), named)
	case clienttesting.PatchActionImpl:
		w.Name = named(a.GetName())
		w.PatchType = string(a.GetPatchType())
		w.Patch = json.RawMessage(slices.Clone(a.GetPatch()))
		if !json.Valid(w.Patch) {
			w.Patch, _ = json.Marshal(string(a.GetPatch()))
		}
		c.add(w)
		// The answer is the object as it was: the patch is not applied.
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(gvk)
		if err := c.store.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: a.GetName()}, cur); err != nil {
			cur.SetNamespace(ns)
			cur.SetName(a.GetName())
		}
		return true, cur, nil
	case clienttesting.DeleteActionImpl:
		w.Name = named(a.GetName())
		c.add(w)
		return true, nil, nil
	}
	return false, nil, nil
}

func (c *renderCluster) recordObject(w Write, obj runtime.Object, named func(string) string) (bool, runtime.Object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return true, nil, fmt.Errorf("polyop render: unexpected %T written", obj)
	}
	name := u.GetName()
	if name == "" {
		name = u.GetGenerateName() + "*"
	}
	w.Name = named(name)
	raw, err := u.MarshalJSON()
	if err != nil {
		return true, nil, err
	}
	w.Object = raw
	c.add(w)
	return true, u.DeepCopy(), nil
}

// eventRecorder records the events the sidecar records through the service.
type eventRecorder struct{ c *renderCluster }

func (r *eventRecorder) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	w := Write{Verb: "event", Event: &Event{Type: eventtype, Reason: reason, Action: action, Message: fmt.Sprintf(note, args...)}}
	if u, ok := regarding.(*unstructured.Unstructured); ok {
		w.APIVersion, w.Kind = u.GetAPIVersion(), u.GetKind()
		w.Name = u.GetName()
		if u.GetNamespace() != "" {
			w.Name = u.GetNamespace() + "/" + u.GetName()
		}
	}
	r.c.add(w)
}

func (r *eventRecorder) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, eventtype, reason, action, note string, args ...any) {
	r.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// objectStore is a client.Reader of the objects polyop render was given.
type objectStore struct {
	mu   sync.RWMutex
	objs []*unstructured.Unstructured
	// indexes are the sidecar's declared indexes, by kind and name.
	indexes map[schema.GroupVersionKind]map[string]index.Expression
}

func (s *objectStore) setIndexes(indexes []description.Index) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.indexes = map[schema.GroupVersionKind]map[string]index.Expression{}
	for _, ix := range indexes {
		if s.indexes[ix.GVK] == nil {
			s.indexes[ix.GVK] = map[string]index.Expression{}
		}
		s.indexes[ix.GVK][ix.Name] = ix.Expression
	}
}

var _ client.Reader = &objectStore{}

func (s *objectStore) set(objs []*unstructured.Unstructured) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs = nil
	for _, o := range objs {
		s.objs = append(s.objs, o.DeepCopy())
	}
}

// Get implements client.Reader for unstructured objects.
func (s *objectStore) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("polyop render reads unstructured objects, not %T", obj)
	}
	gvk := u.GroupVersionKind()
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, o := range s.objs {
		if o.GroupVersionKind() == gvk && o.GetNamespace() == key.Namespace && o.GetName() == key.Name {
			o.DeepCopyInto(u)
			return nil
		}
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return apierrors.NewNotFound(plural.GroupResource(), key.Name)
}

// List implements client.Reader for unstructured lists, by namespace, labels,
// the fields metadata.name and metadata.namespace, and, as the host's cache,
// one exact value of a declared index or of the owner-UID index.
func (s *objectStore) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	ul, ok := list.(*unstructured.UnstructuredList)
	if !ok {
		return fmt.Errorf("polyop render reads unstructured lists, not %T", list)
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	gvk := ul.GroupVersionKind()
	gvk.Kind = trimList(gvk.Kind)
	s.mu.RLock()
	defer s.mu.RUnlock()
	ul.Items = nil
	for _, o := range s.objs {
		if o.GroupVersionKind() != gvk || lo.Namespace != "" && o.GetNamespace() != lo.Namespace {
			continue
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		if lo.FieldSelector != nil {
			if byIndex, found, err := s.indexed(gvk, lo.FieldSelector, o); err != nil {
				return err
			} else if byIndex {
				if !found {
					continue
				}
			} else {
				for _, r := range lo.FieldSelector.Requirements() {
					if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
						return apierrors.NewBadRequest(fmt.Sprintf("polyop render selects by the fields metadata.name and metadata.namespace and by the sidecar's indexes of %s (%s) only, not %s",
							gvk.Kind, listOrNone(s.indexNames(gvk)), r.Field))
					}
				}
				if !lo.FieldSelector.Matches(fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()}) {
					continue
				}
			}
		}
		ul.Items = append(ul.Items, *o.DeepCopy())
	}
	return nil
}

// indexed reports whether sel asks for one value of an index of gvk (a
// declared one, or the owner-UID index), and whether o holds it, as the
// host's cache answers "<index>=<value>".
func (s *objectStore) indexed(gvk schema.GroupVersionKind, sel fields.Selector, o *unstructured.Unstructured) (byIndex, found bool, err error) {
	reqs := sel.Requirements()
	if len(reqs) != 1 {
		return false, false, nil
	}
	r := reqs[0]
	e, declared := s.indexes[gvk][r.Field]
	if !declared && r.Field != index.OwnerUID {
		return false, false, nil
	}
	if r.Operator != selection.Equals && r.Operator != selection.DoubleEquals {
		return true, false, apierrors.NewBadRequest(fmt.Sprintf("polyop render selects by index %s with = or == only, as the host's cache does, not %s", r.Field, r.Operator))
	}
	var values []string
	if declared {
		// An object the expression fails on is indexed under no value, as
		// the host indexes it.
		values, _ = e.Values(o.Object)
	} else if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		values = []string{string(ref.UID)}
	}
	return true, slices.Contains(values, r.Value), nil
}

// indexNames are the names of gvk's declared indexes, sorted.
func (s *objectStore) indexNames(gvk schema.GroupVersionKind) []string {
	names := make([]string, 0, len(s.indexes[gvk]))
	for name := range s.indexes[gvk] {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func trimList(kind string) string {
	if len(kind) > 4 && kind[len(kind)-4:] == "List" {
		return kind[:len(kind)-4]
	}
	return kind
}

// lateMapper is a RESTMapper set once the sidecar has described itself;
// until then it maps nothing.
type lateMapper struct {
	mu sync.RWMutex
	m  meta.RESTMapper
}

func (l *lateMapper) set(m meta.RESTMapper) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m = m
}

func (l *lateMapper) get() meta.RESTMapper {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.m == nil {
		return meta.NewDefaultRESTMapper(nil)
	}
	return l.m
}

func (l *lateMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return l.get().KindFor(r)
}

func (l *lateMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return l.get().KindsFor(r)
}

func (l *lateMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return l.get().ResourceFor(r)
}

func (l *lateMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return l.get().ResourcesFor(r)
}

func (l *lateMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return l.get().RESTMapping(gk, versions...)
}

func (l *lateMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return l.get().RESTMappings(gk, versions...)
}

func (l *lateMapper) ResourceSingularizer(resource string) (string, error) {
	return l.get().ResourceSingularizer(resource)
}
