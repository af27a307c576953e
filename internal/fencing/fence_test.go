package fencing_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/polyop/polyop/internal/fencing"
)

func TestChecksAndWriteContexts(t *testing.T) {
	t.Parallel()
	until := time.Now().Add(time.Hour)
	held := fencing.Term{Number: 3, Until: until, Held: true, Lease: "shard Lease ns/l"}
	for name, tc := range map[string]struct {
		now     fencing.Term
		lapsed  bool
		message string
	}{
		"if the term begun is still held, then the write may go": {now: held},
		"if a new term began since, then nothing begun under the old one is written": {
			now: fencing.Term{Number: 4, Until: until, Held: true, Lease: "shard Lease ns/l"}, lapsed: true,
			message: "term 3 of shard Lease ns/l, under which this began, has ended (its term is now 4)",
		},
		"if the term is no longer held, then nothing is written": {
			now: fencing.Term{Number: 3, Until: until, Lease: "shard Lease ns/l"}, lapsed: true,
			message: "does not hold shard Lease ns/l now (term 3)",
		},
		"if the term ended by the clock, then the message says how long ago": {
			now: fencing.Term{Number: 3, Until: time.Now().Add(-time.Second), Lease: "shard Lease ns/l"}, lapsed: true,
			message: "term 3 of shard Lease ns/l ended 1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := fencing.Func(func() fencing.Term { return tc.now })
			err := fencing.Check(f, held)
			if fencing.IsLapsed(err) != tc.lapsed || (err != nil) != tc.lapsed {
				t.Fatalf("Check = %v, want lapsed %v", err, tc.lapsed)
			}
			if tc.lapsed && !strings.Contains(err.Error(), tc.message) {
				t.Errorf("Check = %q, want it to say %q", err, tc.message)
			}
			ctx, cancel, err := fencing.WriteContext(context.Background(), f, held)
			defer cancel()
			if (err != nil) != tc.lapsed {
				t.Fatalf("WriteContext = %v", err)
			}
			if !tc.lapsed {
				if d, ok := ctx.Deadline(); !ok || !d.Equal(until) {
					t.Errorf("the write's deadline is %v (%v), want the term's end %v", d, ok, until)
				}
			}
		})
	}
}

func TestAWriteTheTermsEndCutsOffFailsWithTheLapse(t *testing.T) {
	t.Parallel()
	begun := fencing.Term{Number: 1, Until: time.Now().Add(50 * time.Millisecond), Held: true, Lease: "l"}
	f := fencing.Func(func() fencing.Term { return begun })
	ctx, cancel, err := fencing.WriteContext(context.Background(), f, begun)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	<-ctx.Done() // a write held back past the term's end
	if err := fencing.Cause(ctx, ctx.Err()); !fencing.IsLapsed(err) {
		t.Errorf("the write's error is %v, want a LapsedError", err)
	}
	if err := fencing.Cause(ctx, nil); err != nil {
		t.Errorf("a write that succeeded has error %v", err)
	}
	if fencing.Check(nil, fencing.Term{}) != nil {
		t.Error("without a fence, a check fails")
	}
}

// lock is a resourcelock.Interface whose writes fail while fail is set.
type lock struct {
	mu   sync.Mutex
	fail bool
	rec  resourcelock.LeaderElectionRecord
}

func (l *lock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rec
	return &r, nil, nil
}

func (l *lock) write(r resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail {
		return errors.New("the API server is unreachable")
	}
	l.rec = r
	return nil
}
func (l *lock) Create(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(r)
}
func (l *lock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(r)
}
func (l *lock) RecordEvent(string) {}
func (l *lock) Identity() string   { return "me" }
func (l *lock) Describe() string   { return "ns/leader" }

func TestTheLeaderLocksTermEndsAtTheRenewDeadlineAndARenewalAfterStartsANewOne(t *testing.T) {
	t.Parallel()
	inner := &lock{}
	clk := testingclock.NewFakePassiveClock(time.Now())
	l := fencing.NewLeaderLock(inner, 10*time.Second)
	fencing.SetClock(l, clk)
	if l.Term().Valid() {
		t.Fatalf("before any write the leader lock holds %+v", l.Term())
	}
	ctx := context.Background()
	if err := l.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	first := l.Term()
	if first.Number != 1 || !first.Valid() || first.Lease != "leader election Lease ns/leader" {
		t.Fatalf("after acquiring, the term is %+v", first)
	}
	if err := l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if got := l.Term().Number; got != 1 {
		t.Errorf("a renewal within the term made term %d", got)
	}
	// Paused past the renew deadline: the elector still believes it leads,
	// the fence does not.
	clk.SetTime(clk.Now().Add(20 * time.Second))
	if err := fencing.Check(l, first); !fencing.IsLapsed(err) {
		t.Errorf("after the renew deadline, Check = %v", err)
	}
	inner.fail = true
	_ = l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if l.Term().Valid() {
		t.Error("a failed renewal made the term held")
	}
	inner.fail = false
	if err := l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if got := l.Term(); got.Number != 2 || !got.Valid() {
		t.Errorf("a renewal after the term ended made term %+v, want term 2, held", got)
	}
	if err := fencing.Check(l, first); !fencing.IsLapsed(err) {
		t.Errorf("a write begun under term 1 passes in term 2: %v", err)
	}
	if err := l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: ""}); err != nil {
		t.Fatal(err)
	}
	if l.Term().Valid() {
		t.Error("after releasing the lock, the term is held")
	}
}
