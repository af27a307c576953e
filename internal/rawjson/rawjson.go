// Package rawjson reads the members of a JSON object without decoding their
// values, and writes members back: for code that changes or keeps part of an
// object the API server sent and passes the rest on as it is. It also writes
// canonical encodings of a JSON value (AppendCanonical, AppendAsMarshalled),
// to compare or hash JSON without decoding it.
package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Stop, returned by the function Each calls, ends Each early without an
// error.
var Stop = errors.New("stop")

// Each calls fn with the key (decoded) and the value (its JSON, sliced from
// data) of every member of the JSON object data, in order, until fn returns
// an error. It checks the object's structure, not every literal in it: it
// expects JSON that a decoder already validated, as json.Unmarshal does
// before it calls an UnmarshalJSON method, or that the API server sent.
func Each(data []byte, fn func(key string, value json.RawMessage) error) error {
	return each(data, func(token, value []byte) error {
		key, err := unquote(token)
		if err != nil {
			return err
		}
		return fn(key, value)
	})
}

// EachRaw is Each with each key as bytes: sliced from data when it has
// nothing to unescape, decoded into a copy otherwise. fn must not modify
// it.
func EachRaw(data []byte, fn func(key []byte, value json.RawMessage) error) error {
	return each(data, func(token, value []byte) error {
		inner := token[1 : len(token)-1]
		if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			return fn(inner, value)
		}
		key, err := unquote(token)
		if err != nil {
			return err
		}
		return fn([]byte(key), value)
	})
}

// each is Each, with each key as its JSON string token (quotes included),
// not decoded: a reader that only compares or copies keys allocates nothing
// for them.
func each(data []byte, fn func(key, value []byte) error) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return fmt.Errorf("not a JSON object")
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return trailing(data, i+1)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return fmt.Errorf("expected a member's key at offset %d", i)
		}
		end, err := skipString(data, i)
		if err != nil {
			return err
		}
		key := data[i:end]
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return fmt.Errorf("expected ':' after key %s", key)
		}
		start := skipSpace(data, i+1)
		end, err = skipValue(data, start)
		if err != nil {
			return fmt.Errorf("member %s: %w", key, err)
		}
		if err := fn(key, data[start:end]); err != nil {
			return stopped(err)
		}
		next, done, ok := afterValue(data, end, '}')
		switch {
		case !ok:
			return fmt.Errorf("expected ',' or '}' after member %s", key)
		case done:
			return trailing(data, next)
		}
		i = next
	}
}

// stopped is what Each and EachElement return for fn's error err: nil for
// Stop, which ends the walk early without an error.
func stopped(err error) error {
	if errors.Is(err, Stop) {
		return nil
	}
	return err
}

// afterValue reads what follows a value that ends at end, inside an object or
// array that close ends: a comma, after which the next member or element
// starts at next; or close (done), after which only white space may follow,
// from next. ok is false for anything else.
func afterValue(data []byte, end int, close byte) (next int, done, ok bool) {
	i := skipSpace(data, end)
	switch {
	case i < len(data) && data[i] == ',':
		return skipSpace(data, i+1), false, true
	case i < len(data) && data[i] == close:
		return i + 1, true, true
	}
	return i, false, false
}

func trailing(data []byte, i int) error {
	if skipSpace(data, i) != len(data) {
		return fmt.Errorf("unexpected data after the JSON object")
	}
	return nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the offset just past the string that starts at i.
func skipString(data []byte, i int) (int, error) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at offset %d", i)
}

// skipValue returns the offset just past the JSON value that starts at i.
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, fmt.Errorf("missing value")
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, err := skipString(data, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unterminated object or array at offset %d", i)
	}
	j := i
	for j < len(data) && isLiteralByte(data[j]) {
		j++
	}
	if j == i {
		return 0, fmt.Errorf("invalid character %q at offset %d", data[i], i)
	}
	return j, nil
}

// isLiteralByte reports whether c can be part of true, false, null or a
// number.
func isLiteralByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'E'
}

// unquote decodes a JSON string token as encoding/json does: escapes
// decoded, and invalid UTF-8 replaced with U+FFFD.
func unquote(token []byte) (string, error) {
	inner := token[1 : len(token)-1]
	ascii := true
	for _, c := range inner {
		switch {
		case c == '\\':
			return unquoteSlow(token)
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if !ascii && !utf8.Valid(inner) {
		return unquoteSlow(token)
	}
	return string(inner), nil
}

func unquoteSlow(token []byte) (string, error) {
	var s string
	if err := json.Unmarshal(token, &s); err != nil {
		return "", err
	}
	return s, nil
}

// AppendString appends s to out as a JSON string.
func AppendString(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(out, b...)
		}
	}
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}

// AppendMember appends the member "key":value to out.
func AppendMember(out []byte, key string, value []byte) []byte {
	out = AppendString(out, key)
	out = append(out, ':')
	return append(out, value...)
}
