package metricsauth

import (
	"sync"
	"time"
)

// ttlCache is a map whose entries expire, of at most size entries: when
// full, adding an entry drops the expired ones, and if none had, an
// arbitrary one. It is safe for concurrent use.
type ttlCache[K comparable, V any] struct {
	size int

	mu      sync.Mutex
	entries map[K]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

func newTTLCache[K comparable, V any](size int) *ttlCache[K, V] {
	return &ttlCache[K, V]{size: size, entries: map[K]ttlEntry[V]{}}
}

// get returns the value of key unless it has expired at now.
func (c *ttlCache[K, V]) get(key K, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put sets the value of key, at now, for ttl.
func (c *ttlCache[K, V]) put(key K, value V, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.size {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.size {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[key] = ttlEntry[V]{value: value, expires: now.Add(ttl)}
}
