package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

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

// sameStatus reports whether the status the object has (current, its JSON;
// nil when it has none) is the one the sidecar returned (status, a JSON
// object checkStatus accepted). An empty status and none are the same:
// writing one over the other would change nothing a client reads. Two
// statuses are the same when they differ only in the order of their keys, in
// white space, in how strings are escaped or how numbers are written (1.0 and
// 1): the API server stores its own encoding of what it was sent, so the
// status read back is rarely the sidecar's bytes.
func sameStatus(current, status []byte) bool {
	if emptyJSON(current) {
		return emptyJSON(status)
	}
	if bytes.Equal(current, status) {
		return true
	}
	a, errA := appendCanonical(nil, current)
	b, errB := appendCanonical(nil, status)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

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

// appendCanonical appends to out a canonical encoding of the valid JSON
// value v: compact, object keys sorted, strings escaped as encoding/json
// escapes them, numbers with a fraction or an exponent in their shortest
// form, and of a key given twice the last value only. It reads v in place:
// the only copy it makes is out.
func appendCanonical(out, v []byte) ([]byte, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil, fmt.Errorf("empty JSON value")
	}
	switch c := v[0]; {
	case c == '{':
		members, err := rawjson.Members(v)
		if err != nil {
			return nil, err
		}
		sort.SliceStable(members, func(i, j int) bool { return members[i].Key < members[j].Key })
		out = append(out, '{')
		first := true
		for i, m := range members {
			if i+1 < len(members) && members[i+1].Key == m.Key {
				continue // of a key given twice, the last counts, as the API server keeps it
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			out = rawjson.AppendString(out, m.Key)
			out = append(out, ':')
			if out, err = appendCanonical(out, m.Value); err != nil {
				return nil, err
			}
		}
		return append(out, '}'), nil
	case c == '[':
		out = append(out, '[')
		first := true
		err := rawjson.EachElement(v, func(e json.RawMessage) error {
			if !first {
				out = append(out, ',')
			}
			first = false
			var err error
			out, err = appendCanonical(out, e)
			return err
		})
		if err != nil {
			return nil, err
		}
		return append(out, ']'), nil
	case c == '"':
		if !plainString(v) {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, err
			}
			return rawjson.AppendString(out, s), nil
		}
		return append(out, v...), nil
	case c == '-' || c >= '0' && c <= '9':
		if bytes.ContainsAny(v, ".eE") {
			if f, err := strconv.ParseFloat(string(v), 64); err == nil {
				return strconv.AppendFloat(out, f, 'g', -1, 64), nil
			}
			// Out of a float's range (1e400): kept as it is written.
		}
	}
	return append(out, v...), nil
}

// plainString reports whether the JSON string token s is already encoded as
// rawjson.AppendString would encode it: nothing escaped, nothing to escape.
func plainString(s []byte) bool {
	for _, c := range s[1 : len(s)-1] {
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
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
// (appendCanonical) of the status it sent and of the status the API server
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
// null or {}) hashes as {}. ok is false for JSON appendCanonical refuses.
func statusHash(raw []byte) (h uint64, ok bool) {
	if emptyJSON(raw) {
		raw = []byte("{}")
	}
	canonical, err := appendCanonical(nil, raw)
	if err != nil {
		return 0, false
	}
	f := fnv.New64a()
	_, _ = f.Write(canonical)
	return f.Sum64(), true
}

// statusAsWritten reports whether writing status over obj (whose status is
// current, which differs from status) would only repeat the host's own last
// write: the sidecar answers the status the host last sent, and obj either
// is older than that write (the cache has not seen it yet) or still holds
// what the API server stored then (the server changed what it was sent, by
// pruning or defaulting). Any other writer's change of the status since, or
// another status from the sidecar, is written.
func (r *Reconciler) statusAsWritten(obj *object.Object, current, status []byte) bool {
	last, ok := r.statuses.lookup(client.ObjectKeyFromObject(obj))
	if !ok {
		return false
	}
	if sent, ok := statusHash(status); !ok || sent != last.sent {
		return false
	}
	if olderThan(obj.GetResourceVersion(), last.resourceVersion) {
		return true
	}
	stored, ok := statusHash(current)
	return ok && stored == last.stored
}

// rememberStatus records the host's status write of obj, as the API server
// stored it (obj, read back from the write), from status as sent.
func (r *Reconciler) rememberStatus(obj *object.Object, status []byte) {
	key := client.ObjectKeyFromObject(obj)
	sent, okSent := statusHash(status)
	current, _ := obj.Field("status")
	stored, okStored := statusHash(current)
	if !okSent || !okStored {
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
