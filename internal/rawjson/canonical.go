package rawjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// AppendCanonical appends to out a canonical encoding of the JSON value v:
// compact, object keys sorted, strings escaped as encoding/json escapes
// them, numbers with a fraction or an exponent in their shortest form, and
// of a key given twice the last value only. Two encodings of one value (in
// another key order, with other white space or escaping, 1.0 for 1) have
// the same canonical encoding. Like Each, it expects JSON that a decoder
// already validated.
//
// It reads v in place and allocates nothing beyond out's growth, except for
// a key or a string it must unescape.
func AppendCanonical(out, v []byte) ([]byte, error) {
	c := canonicalizers.Get().(*canonicalizer)
	out, err := c.append(out, v)
	// The members point into v: dropped, so that the pool holds no
	// caller's JSON.
	clear(c.members[:cap(c.members)])
	c.members = c.members[:0]
	if cap(c.members) <= maxPooledMembers {
		canonicalizers.Put(c)
	}
	return out, err
}

// canonicalizer holds the members AppendCanonical sorts: one stack for the
// whole value, each object's members on top of its parent's while it is
// written.
type canonicalizer struct {
	members []canonicalMember
}

// canonicalMember is a member of an object being written: its key,
// decoded, and its value's JSON.
type canonicalMember struct {
	key, value []byte
}

var canonicalizers = sync.Pool{New: func() any { return &canonicalizer{members: make([]canonicalMember, 0, 32)} }}

// maxPooledMembers bounds the stacks kept in canonicalizers: one grown by a
// rare large object is left to the garbage collector.
const maxPooledMembers = 1024

func (c *canonicalizer) append(out, v []byte) ([]byte, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil, fmt.Errorf("empty JSON value")
	}
	switch b := v[0]; {
	case b == '{':
		return c.appendObject(out, v)
	case b == '[':
		return c.appendArray(out, v)
	case b == '"':
		if !plainString(v) {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, err
			}
			return AppendString(out, s), nil
		}
		return append(out, v...), nil
	case b == '-' || b >= '0' && b <= '9':
		if bytes.ContainsAny(v, ".eE") {
			if f, err := strconv.ParseFloat(string(v), 64); err == nil {
				return strconv.AppendFloat(out, f, 'g', -1, 64), nil
			}
			// Out of a float's range (1e400): kept as it is written.
		}
	}
	return append(out, v...), nil
}

func (c *canonicalizer) appendObject(out, v []byte) ([]byte, error) {
	base := len(c.members)
	defer func() { c.members = c.members[:base] }()
	err := each(v, func(key, value []byte) error {
		if plainString(key) {
			key = key[1 : len(key)-1]
		} else {
			s, err := unquote(key)
			if err != nil {
				return err
			}
			key = []byte(s)
		}
		c.members = append(c.members, canonicalMember{key: key, value: value})
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Stable: of a key given twice, the last stays last.
	slices.SortStableFunc(c.members[base:], func(a, b canonicalMember) int { return bytes.Compare(a.key, b.key) })
	out = append(out, '{')
	first := true
	// c.members grows as the values are written: indexed, not ranged over.
	for i, end := base, len(c.members); i < end; i++ {
		m := c.members[i]
		if i+1 < end && bytes.Equal(c.members[i+1].key, m.key) {
			continue // of a key given twice, the last counts, as the API server keeps it
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = appendStringBytes(out, m.key)
		out = append(out, ':')
		if out, err = c.append(out, m.value); err != nil {
			return nil, err
		}
	}
	return append(out, '}'), nil
}

func (c *canonicalizer) appendArray(out, v []byte) ([]byte, error) {
	out = append(out, '[')
	first := true
	err := EachElement(v, func(e json.RawMessage) error {
		if !first {
			out = append(out, ',')
		}
		first = false
		var err error
		out, err = c.append(out, e)
		return err
	})
	if err != nil {
		return nil, err
	}
	return append(out, ']'), nil
}

// plainString reports whether the JSON string token s is already encoded as
// AppendString would encode it: nothing escaped, nothing to escape.
func plainString(s []byte) bool {
	for _, c := range s[1 : len(s)-1] {
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// appendStringBytes is AppendString of a string held as bytes, which it
// converts only when it must escape something.
func appendStringBytes(out, s []byte) []byte {
	for _, c := range s {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return AppendString(out, string(s))
		}
	}
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}
