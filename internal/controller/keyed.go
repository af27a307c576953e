package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// keyed is a value per reconciled object, safe for the controller's
// workers to share.
type keyed[V comparable] struct {
	mu     sync.Mutex
	values map[types.NamespacedName]V
}

func newKeyed[V comparable]() *keyed[V] {
	return &keyed[V]{values: map[types.NamespacedName]V{}}
}

// get is key's value, the zero value when it has none.
func (k *keyed[V]) get(key types.NamespacedName) V {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.values[key]
}

// lookup is key's value, and whether it has one.
func (k *keyed[V]) lookup(key types.NamespacedName) (V, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.values[key]
	return v, ok
}

// holds reports whether key's value is v.
func (k *keyed[V]) holds(key types.NamespacedName, v V) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	got, ok := k.values[key]
	return ok && got == v
}

func (k *keyed[V]) record(key types.NamespacedName, v V) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.values[key] = v
}

func (k *keyed[V]) forget(key types.NamespacedName) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.values, key)
}

// forgetIf forgets key's value if it is still v (another worker may have
// recorded a newer one meanwhile).
func (k *keyed[V]) forgetIf(key types.NamespacedName, v V) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.values[key] == v {
		delete(k.values, key)
	}
}
