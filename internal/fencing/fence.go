package fencing

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Term is a stretch of time during which a replica holds its lease.
type Term struct {
	// Number counts the replica's terms, from 1: each successful renewal of
	// the lease after the last term ended starts the next. 0 is no term.
	Number uint64
	// Until is when the term ends unless the lease is renewed before then:
	// the start of the last successful renewal plus the renew deadline.
	Until time.Time
	// Held is whether the replica may act under the term: it holds the
	// lease, and (for a term that follows a lapse) has refreshed its view.
	Held bool
	// Lease names the lease, for messages: "Lease <namespace>/<name>".
	Lease string
}

// Valid reports whether the term is held. (A Fence computes Held when it
// is asked, by its own clock.)
func (t Term) Valid() bool { return t.Held && t.Number > 0 }

// A Fence tells the term its replica holds now.
type Fence interface {
	// Term returns the current term. Between two calls its Number only
	// grows.
	Term() Term
}

// Func adapts a function to a Fence.
type Func func() Term

// Term implements Fence.
func (f Func) Term() Term { return f() }

// LapsedError is a write, or the answer of a call, refused because the term
// it was made under is no longer held: the lease lapsed, or was lost, or a
// new term began.
type LapsedError struct {
	// Begun is the term the reconcile began under.
	Begun Term
	// Now is the fence's term when the check was made.
	Now Term
	// At is when the check was made.
	At time.Time
}

func (e *LapsedError) Error() string {
	switch {
	case e.Now.Number != e.Begun.Number:
		return fmt.Sprintf("the replica's term %d of %s, under which this began, has ended (its term is now %d): nothing begun under an earlier term is written",
			e.Begun.Number, e.Begun.Lease, e.Now.Number)
	case !e.Now.Until.IsZero() && !e.At.Before(e.Now.Until):
		return fmt.Sprintf("the replica's term %d of %s ended %s ago (the lease was not renewed in time): it writes nothing until it holds the lease again with a fresh view",
			e.Now.Number, e.Now.Lease, e.At.Sub(e.Now.Until).Round(time.Millisecond))
	}
	return fmt.Sprintf("the replica does not hold %s now (term %d): it writes nothing until it holds it again with a fresh view", e.Now.Lease, e.Now.Number)
}

// IsLapsed reports whether err is, or wraps, a LapsedError.
func IsLapsed(err error) bool {
	var lapsed *LapsedError
	return errors.As(err, &lapsed)
}

// Check returns nil when f's current term is begun and still valid, and a
// LapsedError otherwise. A nil f always passes: the replica writes without a
// lease.
func Check(f Fence, begun Term) error {
	_, err := check(f, begun)
	return err
}

func check(f Fence, begun Term) (Term, error) {
	if f == nil {
		return Term{}, nil
	}
	t := f.Term()
	if t.Number != begun.Number || !t.Valid() {
		return t, &LapsedError{Begun: begun, Now: t, At: time.Now()}
	}
	return t, nil
}

// WriteContext checks f's term as Check does and returns ctx with the
// term's end as its deadline (or ctx's own, when earlier), for one write: a
// write that a pause holds back past the term's end fails in the client
// instead of reaching the API server. Call cancel when the write is done. A
// nil f returns ctx as it is.
func WriteContext(ctx context.Context, f Fence, begun Term) (context.Context, context.CancelFunc, error) {
	t, err := check(f, begun)
	if err != nil {
		return ctx, func() {}, err
	}
	if f == nil {
		return ctx, func() {}, nil
	}
	ctx, cancel := context.WithDeadlineCause(ctx, t.Until, &LapsedError{Begun: begun, Now: t, At: t.Until})
	return ctx, cancel, nil
}

// termKey is the context key of the term a reconcile began under.
type termKey struct{}

// WithTerm returns ctx carrying t, the term a reconcile begins under.
func WithTerm(ctx context.Context, t Term) context.Context {
	return context.WithValue(ctx, termKey{}, t)
}

// TermFrom returns the term WithTerm put in ctx, and whether there is one.
func TermFrom(ctx context.Context) (Term, bool) {
	t, ok := ctx.Value(termKey{}).(Term)
	return t, ok
}

// Cause returns the LapsedError that ended wctx, a context WriteContext
// made, when the write err failed because of it; err otherwise.
func Cause(wctx context.Context, err error) error {
	if err == nil || wctx.Err() == nil {
		return err
	}
	if cause := context.Cause(wctx); IsLapsed(cause) {
		return cause
	}
	return err
}
