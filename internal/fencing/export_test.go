package fencing

import "k8s.io/utils/clock"

// SetClock makes l tell the time by c.
func SetClock(l *LeaderLock, c clock.PassiveClock) { l.clock = c }
