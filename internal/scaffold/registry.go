package scaffold

import (
	"fmt"
	"sync"
)

var (
	registryMu sync.RWMutex
	registry   = map[Language]Scaffolder{}
)

// Register makes s the Scaffolder of language l. The language packages
// register themselves when imported.
func Register(l Language, s Scaffolder) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry[l] = s
}

// For returns the Scaffolder of language l.
func For(l Language) (Scaffolder, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	s, ok := registry[l]
	if !ok {
		return nil, fmt.Errorf("this polyop cannot scaffold %s projects", l)
	}
	return s, nil
}
