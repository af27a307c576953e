package membership

import "sync"

// notifier wakes subscribers when something changed. Each subscriber has a
// channel holding at most one pending notification: changes that come faster
// than it reads are folded into one, and it reads the current state after
// each; a slow subscriber never blocks the publisher.
type notifier struct {
	mu   sync.Mutex
	subs []chan struct{}
}

// subscribe returns a new subscriber's channel.
func (n *notifier) subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.subs = append(n.subs, ch)
	return ch
}

// notify wakes every subscriber.
func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
