package serverside

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/polyop/polyop/internal/sharding/membership"
	"github.com/polyop/polyop/internal/sharding/ring"
)

type publishNothing struct{}

func (publishNothing) Publish(context.Context, string) error { return nil }

type noLeases struct{}

func (noLeases) Leases() []membership.MemberLease { return nil }
func (noLeases) ReadLeases(context.Context) ([]membership.MemberLease, error) {
	return nil, nil
}
func (noLeases) SubscribeLeases() <-chan struct{} { return nil }

type fixedRing struct{ r *ring.Ring }

func (f fixedRing) Current() *ring.Ring      { return f.r }
func (f fixedRing) Changes() <-chan struct{} { return nil }

// An object that comes into a replica's share is read from the API server
// before its first reconcile: its cache may still hold the version of the
// last time the replica owned it.
func TestAnObjectThatComesIntoTheShareIsReadBeforeItsCacheIsTrusted(t *testing.T) {
	t.Parallel()
	both := ring.New([]string{"a", "b"}, 0)
	alone := ring.New([]string{"a"}, 0)
	b, err := NewBarrier(BarrierOptions{Member: "a", Ring: fixedRing{both}, Publisher: publishNothing{}, Leases: noLeases{}})
	if err != nil {
		t.Fatal(err)
	}
	var ours, theirs types.UID
	for ours == "" || theirs == "" {
		uid := uuid.NewUUID()
		if both.OwnerOf(uid) == "a" {
			ours = uid
		} else {
			theirs = uid
		}
	}
	ctx := context.Background()
	if err := b.adopt(ctx, both, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if b.NeedsRead(ours) || b.NeedsRead(theirs) {
		t.Error("the first ring's objects need a read: its cache was listed for it")
	}
	if err := b.adopt(ctx, alone, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if b.NeedsRead(ours) {
		t.Error("an object the replica owned under the ring before needs a read")
	}
	if !b.NeedsRead(theirs) {
		t.Fatal("an object that came into the share does not need a read")
	}
	b.Confirm(theirs)
	if b.NeedsRead(theirs) {
		t.Error("a confirmed object still needs a read")
	}
	if err := b.adopt(ctx, both, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if err := b.adopt(ctx, alone, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if !b.NeedsRead(theirs) {
		t.Error("an object that left the share and came back is trusted from the confirmation of its last stay")
	}
}
