package sidecar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// without returns the JSON object data without the members named in drop,
// and with its metadata member passed through metadata (when not nil). The
// other members are copied as they are, in their order: their values are
// scanned, not decoded. data is what encoding/json wrote (compact); other
// valid JSON objects are read too, and anything else is an error.
func without(data []byte, drop []string, metadata func([]byte) ([]byte, error)) ([]byte, error) {
	out := make([]byte, 0, len(data))
	out = append(out, '{')
	first := true
	err := eachMember(data, func(key, member, value []byte) error {
		if slices.ContainsFunc(drop, func(name string) bool { return string(key) == name }) {
			return nil
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		if string(key) != "metadata" || metadata == nil {
			out = append(out, member...)
			return nil
		}
		stripped, err := metadata(value)
		if err != nil {
			return err
		}
		out = append(out, member[:len(member)-len(value)]...)
		out = append(out, stripped...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// errNotAnObject is what eachMember returns for data that is not a JSON
// object it can read.
var errNotAnObject = errors.New("not a JSON object")

// eachMember calls fn with each member of the JSON object data: its key
// (unquoted), the member's bytes (key, colon and value, as written) and the
// value's.
func eachMember(data []byte, fn func(key, member, value []byte) error) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return errNotAnObject
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return trailing(data, i+1)
	}
	for {
		start := i
		end, err := skipString(data, i)
		if err != nil {
			return err
		}
		key, err := memberKey(data[start:end])
		if err != nil {
			return err
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return fmt.Errorf("%w: no colon after key %q", errNotAnObject, key)
		}
		i = skipSpace(data, i+1)
		valueStart := i
		if i, err = skipValue(data, i); err != nil {
			return err
		}
		if err := fn(key, data[start:i], data[valueStart:i]); err != nil {
			return err
		}
		i = skipSpace(data, i)
		switch {
		case i < len(data) && data[i] == ',':
			i = skipSpace(data, i+1)
		case i < len(data) && data[i] == '}':
			return trailing(data, i+1)
		default:
			return fmt.Errorf("%w: member %q is not followed by a comma or the object's end", errNotAnObject, key)
		}
	}
}

// memberKey is the string a quoted key stands for.
func memberKey(quoted []byte) ([]byte, error) {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return quoted[1 : len(quoted)-1], nil
	}
	var key string
	if err := json.Unmarshal(quoted, &key); err != nil {
		return nil, fmt.Errorf("%w: key %s: %w", errNotAnObject, quoted, err)
	}
	return []byte(key), nil
}

func trailing(data []byte, i int) error {
	if skipSpace(data, i) != len(data) {
		return fmt.Errorf("%w: data after the object's end", errNotAnObject)
	}
	return nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at data[i].
func skipString(data []byte, i int) (int, error) {
	if i >= len(data) || data[i] != '"' {
		return 0, fmt.Errorf("%w: a string was expected at byte %d", errNotAnObject, i)
	}
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: unterminated string", errNotAnObject)
}

// skipValue returns the index after the value that starts at data[i]. It
// checks the nesting of objects and arrays and the ends of strings; a
// scalar is taken up to the next delimiter.
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, fmt.Errorf("%w: a value was expected at its end", errNotAnObject)
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		var stack [16]byte
		open := stack[:0]
		for i < len(data) {
			switch c := data[i]; c {
			case '"':
				end, err := skipString(data, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			case '{', '[':
				open = append(open, c)
			case '}', ']':
				if len(open) == 0 || (c == '}') != (open[len(open)-1] == '{') {
					return 0, fmt.Errorf("%w: unbalanced %q at byte %d", errNotAnObject, c, i)
				}
				open = open[:len(open)-1]
				if len(open) == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, fmt.Errorf("%w: unterminated object or array", errNotAnObject)
	default:
		start := i
		for i < len(data) && !endsScalar(data[i]) {
			i++
		}
		if i == start {
			return 0, fmt.Errorf("%w: a value was expected at byte %d", errNotAnObject, i)
		}
		return i, nil
	}
}

func endsScalar(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}
