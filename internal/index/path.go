package index

import (
	"fmt"
	"strconv"
	"strings"
)

// A path is a compiled field path: a sequence of steps from the object down
// to the values.
//
// The syntax is a small, exact subset of kubectl's JSONPath:
//
//	.spec.nodeName                                   a field, then a field
//	spec.nodeName                                    the leading dot is optional
//	.metadata.labels['app.kubernetes.io/name']       a field whose name has dots or slashes
//	.spec.containers[*].image                        every item of a list
//	.spec.containers[0].image                        one item of a list
//	.metadata.ownerReferences[?(@.controller==true)].name
//	                                                 the items whose field equals a literal
//
// A filter's field is a dot-separated path of plain names; its literal is
// true, false, null, a number, or a string in single or double quotes.
type path []step

// step is one step of a path: into a field, or over the items of a list.
type step struct {
	// field is the field to step into, when the step is a field.
	field string
	// all steps over every item of a list ([*]).
	all bool
	// item steps into one item of a list ([N]); -1 when not.
	item int
	// filter keeps the items of a list whose field at filterPath equals
	// filterValue ([?(@.a.b==v)]).
	filterPath  []string
	filterValue any
}

// parsePath compiles a field path, or says where it is wrong.
func parsePath(s string) (path, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return nil, fmt.Errorf("empty field path")
	}
	var p path
	i := 0
	if in[0] == '.' {
		i = 1
	}
	expectField := true
	for i < len(in) {
		switch {
		case in[i] == '[':
			end, st, err := parseBracket(in, i)
			if err != nil {
				return nil, fmt.Errorf("field path %q: %w", s, err)
			}
			p = append(p, st)
			i = end
			expectField = false
		case in[i] == '.' && !expectField:
			i++
			expectField = true
		case expectField:
			j := i
			for j < len(in) && in[j] != '.' && in[j] != '[' {
				j++
			}
			name := in[i:j]
			if !plainName(name) {
				return nil, fmt.Errorf("field path %q: %q at offset %d is not a field name: bare names have letters, digits, '_', '-' and '$' only; quote a name with dots or slashes as ['name'], for example .metadata.labels['app.kubernetes.io/name']", s, name, i)
			}
			p = append(p, step{field: name, item: -1})
			i = j
			expectField = false
		default:
			return nil, fmt.Errorf("field path %q: unexpected %q at offset %d", s, in[i], i)
		}
	}
	if expectField {
		return nil, fmt.Errorf("field path %q ends with a dot", s)
	}
	return p, nil
}

// parseBracket parses the bracket starting at in[i] ("[*]", "[N]",
// "['name']" or "[?(@.a==v)]"), returning the offset after it.
func parseBracket(in string, i int) (int, step, error) {
	rest := in[i+1:]
	switch {
	case strings.HasPrefix(rest, "*]"):
		return i + 3, step{all: true, item: -1}, nil
	case strings.HasPrefix(rest, "'") || strings.HasPrefix(rest, `"`):
		q := rest[0]
		end := strings.IndexByte(rest[1:], q)
		if end < 0 || !strings.HasPrefix(rest[end+2:], "]") {
			return 0, step{}, fmt.Errorf("unterminated ['name'] at offset %d", i)
		}
		name := rest[1 : end+1]
		if name == "" {
			return 0, step{}, fmt.Errorf("empty field name at offset %d", i)
		}
		return i + end + 4, step{field: name, item: -1}, nil
	case strings.HasPrefix(rest, "?(@."):
		end := strings.Index(rest, ")]")
		if end < 0 {
			return 0, step{}, fmt.Errorf("unterminated filter at offset %d (write [?(@.field==value)])", i)
		}
		cond := rest[len("?(@."):end]
		lhs, rhs, ok := strings.Cut(cond, "==")
		if !ok {
			return 0, step{}, fmt.Errorf("filter %q at offset %d: only == is supported (write [?(@.field==value)])", cond, i)
		}
		fp := strings.Split(strings.TrimSpace(lhs), ".")
		for _, f := range fp {
			if !plainName(f) {
				return 0, step{}, fmt.Errorf("filter %q at offset %d: %q is not a field name", cond, i, f)
			}
		}
		v, err := parseLiteral(strings.TrimSpace(rhs))
		if err != nil {
			return 0, step{}, fmt.Errorf("filter %q at offset %d: %w", cond, i, err)
		}
		return i + 1 + end + 2, step{filterPath: fp, filterValue: v, item: -1}, nil
	default:
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return 0, step{}, fmt.Errorf("unterminated [ at offset %d", i)
		}
		n, err := strconv.Atoi(rest[:end])
		if err != nil || n < 0 {
			return 0, step{}, fmt.Errorf("[%s] at offset %d is not [*], [N], ['name'] or [?(@.field==value)]", rest[:end], i)
		}
		return i + end + 2, step{item: n}, nil
	}
}

// parseLiteral parses a filter's literal as unstructured JSON holds it: a
// string, a bool, nil, an int64 or a float64.
func parseLiteral(s string) (any, error) {
	switch {
	case s == "true":
		return true, nil
	case s == "false":
		return false, nil
	case s == "null":
		return nil, nil
	case len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0]:
		return s[1 : len(s)-1], nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f, nil
	}
	return nil, fmt.Errorf("%q is not a literal (true, false, null, a number, or a quoted string)", s)
}

// plainName reports whether s can be written as a bare field name.
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !nameRune(r) {
			return false
		}
	}
	return true
}

// nameRune reports whether r may appear in a bare field name.
func nameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '$'
}

// values walks the path through obj and returns the scalar values found, as
// strings.
func (p path) values(obj map[string]any) []string {
	var out []string
	p.walk(obj, &out)
	return out
}

func (p path) walk(v any, out *[]string) {
	if len(p) == 0 {
		collect(v, out)
		return
	}
	st, rest := p[0], p[1:]
	switch {
	case st.field != "":
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if next, ok := m[st.field]; ok {
			rest.walk(next, out)
		}
	case st.all || st.filterPath != nil:
		items, ok := v.([]any)
		if !ok {
			return
		}
		for _, item := range items {
			if st.all || matches(item, st.filterPath, st.filterValue) {
				rest.walk(item, out)
			}
		}
	case st.item >= 0:
		items, ok := v.([]any)
		if ok && st.item < len(items) {
			rest.walk(items[st.item], out)
		}
	}
}

// matches reports whether the field of item at fp equals want.
func matches(item any, fp []string, want any) bool {
	v := item
	for _, f := range fp {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[f]; !ok {
			return false
		}
	}
	switch w := want.(type) {
	case int64:
		switch g := v.(type) {
		case int64:
			return g == w
		case float64:
			return g == float64(w)
		}
		return false
	case float64:
		switch g := v.(type) {
		case int64:
			return float64(g) == w
		case float64:
			return g == w
		}
		return false
	}
	return v == want
}

// collect appends the scalar v as a string, or each scalar item of the list
// v; maps, nulls and nested lists give nothing.
func collect(v any, out *[]string) {
	if items, ok := v.([]any); ok {
		for _, item := range items {
			if s, ok := scalar(item); ok {
				*out = append(*out, s)
			}
		}
		return
	}
	if s, ok := scalar(v); ok {
		*out = append(*out, s)
	}
}

// scalar formats a string, number or bool as the text a field selector
// compares it with.
func scalar(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	}
	return "", false
}
