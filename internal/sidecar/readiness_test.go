package sidecar

import (
	"errors"
	"testing"
	"time"
)

func TestReadinessIgnoresShortOutages(t *testing.T) {
	t.Parallel()
	down := errors.New("connection refused")
	start := time.Now()
	at := start.Add
	for name, tc := range map[string]struct {
		checks []error
		times  []time.Duration
		want   []bool // ready after each check
	}{
		"if the sidecar never served, then a failed check is not ready": {
			checks: []error{down, nil}, times: []time.Duration{0, time.Second}, want: []bool{false, true},
		},
		"if the sidecar fails for less than unreadyAfter, then it stays ready": {
			checks: []error{nil, down, down, down, nil}, times: []time.Duration{0, time.Second, 2 * time.Second, 5 * time.Second, 5500 * time.Millisecond},
			want: []bool{true, true, true, true, true},
		},
		"if the sidecar fails for unreadyAfter and unreadyChecks checks, then it is not ready until it serves again": {
			checks: []error{nil, down, down, down, nil},
			times:  []time.Duration{0, time.Second, 3 * time.Second, time.Second + unreadyAfter, time.Second + unreadyAfter + 100*time.Millisecond},
			want:   []bool{true, true, true, false, true},
		},
		"if a single check fails long after the last, then it stays ready": {
			checks: []error{nil, down, nil}, times: []time.Duration{0, time.Minute, time.Minute + time.Second}, want: []bool{true, true, true},
		},
		"if two checks fail far apart, then it is not ready": {
			checks: []error{nil, down, down}, times: []time.Duration{0, 10 * time.Second, 20 * time.Second}, want: []bool{true, true, false},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var r readiness
			for i, err := range tc.checks {
				if got := r.observe(at(tc.times[i]), err) == nil; got != tc.want[i] {
					t.Errorf("after check %d (%v at %s): ready = %v, want %v", i, err, tc.times[i], got, tc.want[i])
				}
			}
		})
	}
}
