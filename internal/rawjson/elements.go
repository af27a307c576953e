package rawjson

import (
	"encoding/json"
	"fmt"
)

// EachElement calls fn with the JSON of every element of the JSON array data
// (sliced from data), in order, until fn returns an error; Stop ends it early
// without one. Like Each, it expects JSON that a decoder already validated.
func EachElement(data []byte, fn func(value json.RawMessage) error) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return fmt.Errorf("not a JSON array")
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return trailing(data, i+1)
	}
	for n := 0; ; n++ {
		end, err := skipValue(data, i)
		if err != nil {
			return fmt.Errorf("element %d: %w", n, err)
		}
		if err := fn(data[i:end]); err != nil {
			return stopped(err)
		}
		next, done, ok := afterValue(data, end, ']')
		switch {
		case !ok:
			return fmt.Errorf("expected ',' or ']' after element %d", n)
		case done:
			return trailing(data, next)
		}
		i = next
	}
}
