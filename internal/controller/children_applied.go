package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// appliedState remembers, per owner, each child's last applied
// configuration (its hash) and the resourceVersion that apply returned, so
// that an unchanged child is not applied again. It is memory only: after a
// restart (or a change of leader) each child is applied once more, which
// changes nothing on the API server.
type appliedState struct {
	mu     sync.Mutex
	owners map[types.NamespacedName]appliedOwner
}

// appliedOwner is what is remembered of one owner. Its children are a slice,
// not a map: an owner has few children, and a small map costs several times
// the memory (the host keeps one appliedOwner per cached owner).
type appliedOwner struct {
	uid      types.UID
	children []appliedChild
}

type appliedChild struct {
	id              childID
	hash            configHash
	resourceVersion string
}

// findApplied returns the child id of children, if it is there.
func findApplied(children []appliedChild, id childID) (appliedChild, bool) {
	for _, c := range children {
		if c.id == id {
			return c, true
		}
	}
	return appliedChild{}, false
}

func newAppliedState() *appliedState {
	return &appliedState{owners: map[types.NamespacedName]appliedOwner{}}
}

// children returns what is remembered of the children of the owner key with
// uid (nothing for another object of the same name).
func (s *appliedState) children(key types.NamespacedName, uid types.UID) []appliedChild {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.owners[key]; ok && o.uid == uid {
		return o.children
	}
	return nil
}

// record replaces what is remembered of key's children.
func (s *appliedState) record(key types.NamespacedName, uid types.UID, children []appliedChild) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owners[key] = appliedOwner{uid: uid, children: children}
}

// forget drops what is remembered of key, once it no longer exists.
func (s *appliedState) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.owners, key)
}
