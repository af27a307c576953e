package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/rawjson"
)

// checkStatus checks that the sidecar's status is a JSON object, without
// decoding it: the host writes it as it came, and a decoded copy of a large
// status costs ten times its size.
func checkStatus(raw []byte) error {
	if !json.Valid(raw) {
		return fmt.Errorf("the sidecar returned a status that is not valid JSON: %q", truncate(raw))
	}
	if t := bytes.TrimSpace(raw); t[0] != '{' {
		return fmt.Errorf("the sidecar returned a status that is not a JSON object: %q", truncate(raw))
	}
	return nil
}

// statusComparison is what writeStatus knows of the status an object has
// (current, its JSON; nil when it has none) and the one the sidecar returned
// (status, a JSON object checkStatus accepted), from one canonical encoding
// of each (rawjson.AppendCanonical): whether they are the same, and the
// hashes statusAsWritten and rememberStatus compare with the host's last
// write.
type statusComparison struct {
	// same: the two are the same status. An empty status and none are
	// the same: writing one over the other would change nothing a client
	// reads. Two statuses are the same when they differ only in the order
	// of their keys, in white space, in how strings are escaped or how
	// numbers are written (1.0 and 1): the API server stores its own
	// encoding of what it was sent, so the status read back is rarely the
	// sidecar's bytes.
	same bool
	// sent and stored are the statusHash of status and of current, when
	// ok (unset when they are the same: only a status to write needs them).
	sent, stored     uint64
	sentOK, storedOK bool
}

// compareStatus compares the status an object has (current) with the one
// the sidecar returned (status). Equal bytes, or two empty statuses, are the
// same without further work; otherwise each is encoded canonically once.
func compareStatus(current, status []byte) statusComparison {
	if emptyJSON(current) && emptyJSON(status) || bytes.Equal(current, status) {
		return statusComparison{same: true}
	}
	bufs := canonicalBuffers.Get().(*[2][]byte)
	defer func() {
		if cap(bufs[0]) <= maxPooledCanonical && cap(bufs[1]) <= maxPooledCanonical {
			canonicalBuffers.Put(bufs)
		}
	}()
	var c statusComparison
	var errCurrent, errStatus error
	bufs[0], errCurrent = canonicalStatus(bufs[0][:0], current)
	bufs[1], errStatus = canonicalStatus(bufs[1][:0], status)
	if c.same = errCurrent == nil && errStatus == nil && bytes.Equal(bufs[0], bufs[1]); c.same {
		return c
	}
	if errCurrent == nil {
		c.stored, c.storedOK = fnv64a(bufs[0]), true
	}
	if errStatus == nil {
		c.sent, c.sentOK = fnv64a(bufs[1]), true
	}
	return c
}

// canonicalBuffers are the buffers of compareStatus's two canonical
// encodings; maxPooledCanonical bounds those kept.
var canonicalBuffers = sync.Pool{New: func() any { return &[2][]byte{make([]byte, 0, 1024), make([]byte, 0, 1024)} }}

const maxPooledCanonical = 64 << 10

// emptyJSON reports whether raw is nothing, null or an empty object.
func emptyJSON(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return true
	}
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return false
	}
	return len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0
}

// canonicalStatus appends to out the canonical encoding of the status raw;
// an empty status (none, null or {}) is {}.
func canonicalStatus(out, raw []byte) ([]byte, error) {
	if emptyJSON(raw) {
		return append(out, "{}"...), nil
	}
	return rawjson.AppendCanonical(out, raw)
}

// fnv64a is the FNV-1a hash of b, as hash/fnv's New64a sums it.
func fnv64a(b []byte) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime
	}
	return h
}

// statusPatch is the JSON patch (RFC 6902) that replaces an object's status
// with status, on the condition that the object is still at resourceVersion.
// It is written out rather than marshalled: encoding/json would check and
// copy the status once more.
func statusPatch(resourceVersion string, status []byte) []byte {
	const (
		head = `[{"op":"replace","path":"/metadata/resourceVersion","value":`
		mid  = `},{"op":"add","path":"/status","value":`
		tail = `}]`
	)
	patch := make([]byte, 0, len(head)+len(resourceVersion)+2+len(mid)+len(status)+len(tail))
	patch = append(patch, head...)
	patch = rawjson.AppendString(patch, resourceVersion)
	patch = append(patch, mid...)
	patch = append(patch, status...)
	return append(patch, tail...)
}

// writtenStatus is what the host remembers of its last status write of one
// object: the write's resourceVersion, and hashes of the canonical encodings
// (rawjson.AppendCanonical) of the status it sent and of the status the API server
// stored, which differs when the server drops fields the schema does not
// know, or fills in defaults.
type writtenStatus struct {
	resourceVersion string
	sent, stored    uint64
}

// writtenStatuses holds each object's writtenStatus, from the write until a
// reconcile finds the object holds exactly the status sent.
type writtenStatuses = keyed[writtenStatus]

func newWrittenStatuses() *writtenStatuses { return newKeyed[writtenStatus]() }

// statusHash is the hash of raw's canonical encoding; an empty status (none,
// null or {}) hashes as {}. ok is false for JSON rawjson.AppendCanonical
// refuses.
func statusHash(raw []byte) (h uint64, ok bool) {
	bufs := canonicalBuffers.Get().(*[2][]byte)
	defer func() {
		if cap(bufs[0]) <= maxPooledCanonical {
			canonicalBuffers.Put(bufs)
		}
	}()
	var err error
	if bufs[0], err = canonicalStatus(bufs[0][:0], raw); err != nil {
		return 0, false
	}
	return fnv64a(bufs[0]), true
}

// statusAsWritten reports whether writing the sidecar's status over obj,
// whose status differs from it (cmp, from compareStatus), would only repeat
// the host's own last write: the sidecar answers the status the host last
// sent, and obj either is older than that write (the cache has not seen it
// yet) or still holds what the API server stored then (the server changed
// what it was sent, by pruning or defaulting). Any other writer's change of
// the status since, or another status from the sidecar, is written.
func (r *Reconciler) statusAsWritten(obj *object.Object, cmp statusComparison) bool {
	last, ok := r.statuses.lookup(client.ObjectKeyFromObject(obj))
	if !ok || !cmp.sentOK || cmp.sent != last.sent {
		return false
	}
	if olderThan(obj.GetResourceVersion(), last.resourceVersion) {
		return true
	}
	return cmp.storedOK && cmp.stored == last.stored
}

// rememberStatus records the host's status write of obj, as the API server
// stored it (obj, read back from the write), from the status as sent, whose
// statusHash is sent (when sentOK).
func (r *Reconciler) rememberStatus(obj *object.Object, sent uint64, sentOK bool) {
	key := client.ObjectKeyFromObject(obj)
	current, _ := obj.Field("status")
	stored, okStored := statusHash(current)
	if !sentOK || !okStored {
		r.statuses.forget(key)
		return
	}
	r.statuses.record(key, writtenStatus{resourceVersion: obj.GetResourceVersion(), sent: sent, stored: stored})
}

// statusSettled forgets the host's last status write of obj once obj, as
// the reconcile read it, holds the status the sidecar answered and is no
// older than that write: comparing with obj alone then tells.
func (r *Reconciler) statusSettled(obj *object.Object) {
	key := client.ObjectKeyFromObject(obj)
	if last, ok := r.statuses.lookup(key); ok && !olderThan(obj.GetResourceVersion(), last.resourceVersion) {
		r.statuses.forgetIf(key, last)
	}
}
