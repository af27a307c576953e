package rawjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
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
	return appendCanonical(out, v, false)
}

// AppendAsMarshalled appends to out what json.Marshal writes for the value
// the API machinery's decoder (k8s.io/apimachinery/pkg/util/json.Unmarshal
// into an interface) reads from the JSON value v: AppendCanonical's
// encoding, but with a whole number that fits an int64 written as that
// int64, and any other number as the float64 it reads as, in encoding/json's
// notation. A number out of a float64's range is an error, as it is for the
// decoder. Like Each, it expects JSON that a decoder already validated.
func AppendAsMarshalled(out, v []byte) ([]byte, error) {
	return appendCanonical(out, v, true)
}

func appendCanonical(out, v []byte, asMarshalled bool) ([]byte, error) {
	c := canonicalizers.Get().(*canonicalizer)
	c.asMarshalled = asMarshalled
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
	// asMarshalled writes numbers as AppendAsMarshalled does.
	asMarshalled bool
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
		if c.asMarshalled {
			return appendMarshalledNumber(out, v)
		}
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
	err := EachRaw(v, func(key []byte, value json.RawMessage) error {
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
		out = AppendStringBytes(out, m.key)
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

// AppendStringBytes is AppendString of a string held as bytes, which it
// converts only when it must escape something.
func AppendStringBytes(out, s []byte) []byte {
	for _, c := range s {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return AppendString(out, string(s))
		}
	}
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}

// appendMarshalledNumber appends the number token v as AppendAsMarshalled
// writes it: as the API machinery's decoder reads it (an int64 when it has
// no fraction and fits one, a float64 otherwise), then as json.Marshal
// writes that.
func appendMarshalledNumber(out, v []byte) ([]byte, error) {
	if bytes.IndexByte(v, '.') < 0 {
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return strconv.AppendInt(out, i, 10), nil
		}
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return nil, fmt.Errorf("number %s does not fit a float64", v)
	}
	// encoding/json's float64 encoding (its floatEncoder).
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(out)
	out = strconv.AppendFloat(out, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9.
		if n := len(out) - start; n >= 4 && out[len(out)-4] == 'e' && out[len(out)-3] == '-' && out[len(out)-2] == '0' {
			out[len(out)-2] = out[len(out)-1]
			out = out[:len(out)-1]
		}
	}
	return out, nil
}

// NumbersFit reports whether every number in the JSON data fits a float64,
// as the API machinery's decoder into interface values requires: 1e400
// does not. Like Each, it expects JSON that a decoder already validated.
func NumbersFit(data []byte) bool {
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			end, err := skipString(data, i)
			if err != nil {
				return false
			}
			i = end - 1
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(data) && isLiteralByte(data[j]) {
				j++
			}
			// Only an exponent, or more digits than a float64's range
			// has, can overflow.
			if tok := data[i:j]; len(tok) > 300 || bytes.ContainsAny(tok, "eE") {
				if _, err := strconv.ParseFloat(string(tok), 64); err != nil {
					return false
				}
			}
			i = j - 1
		}
	}
	return true
}
