package controller

// sameJSON reports whether a and b, values decoded from JSON by the API
// machinery (whole numbers as int64, others as float64), are the same JSON
// value. A number is compared by its value, whatever it was decoded as: a
// sidecar may send 1.0 (Python's json does) where the API server, which
// re-encodes what it stores, then holds 1.
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !sameJSON(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case int64:
		switch b := b.(type) {
		case int64:
			return a == b
		case float64:
			return sameNumber(a, b)
		}
		return false
	case float64:
		switch b := b.(type) {
		case float64:
			return a == b
		case int64:
			return sameNumber(b, a)
		}
		return false
	}
	return a == b
}

// sameNumber reports whether i and f are the same number: f is whole, in
// int64's range, and equal to i exactly (not merely once rounded to a
// float64).
func sameNumber(i int64, f float64) bool {
	return f >= -(1<<63) && f < 1<<63 && int64(f) == i && float64(i) == f
}
