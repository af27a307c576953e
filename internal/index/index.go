package index

import (
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/object"
)

// Expression computes the values an object is indexed under.
type Expression interface {
	// Values are obj's values, without duplicates or empty strings, in the
	// order found.
	Values(obj map[string]any) ([]string, error)
}

// FieldPath compiles a field path (see path for its syntax).
func FieldPath(s string) (Expression, error) {
	p, err := parsePath(s)
	if err != nil {
		return nil, err
	}
	return pathExpression{p}, nil
}

// CEL compiles a CEL expression over the variable "object" returning a string
// or a list of strings, its evaluations bounded by costLimit (CELCostLimit
// when zero).
func CEL(expr string, costLimit uint64) (Expression, error) {
	if costLimit == 0 {
		costLimit = CELCostLimit
	}
	p, err := compileCEL(expr, costLimit)
	if err != nil {
		return nil, err
	}
	return celExpression{p}, nil
}

type pathExpression struct{ p path }

func (e pathExpression) Values(obj map[string]any) ([]string, error) {
	return tidy(e.p.values(obj)), nil
}

type celExpression struct{ p *celProgram }

func (e celExpression) Values(obj map[string]any) ([]string, error) {
	v, err := e.p.values(obj)
	return tidy(v), err
}

// tidy drops empty strings and duplicates, keeping the first of each.
func tidy(in []string) []string {
	out := in[:0]
	for _, s := range in {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// IndexerFunc is the controller-runtime index function of the index name on
// kind: e's values of each object the cache holds. An object e fails on is
// logged at error level, naming the index and the object, and indexed under
// no value.
func IndexerFunc(kind, name string, e Expression, log logr.Logger) client.IndexerFunc {
	return func(obj client.Object) []string {
		var content map[string]any
		var err error
		if p, ok := e.(pathExpression); ok {
			content, err = p.contentOf(obj)
		} else {
			content, err = contentOf(obj)
		}
		if err == nil {
			var values []string
			if values, err = e.Values(content); err == nil {
				return values
			}
		}
		log.Error(err, "Cannot compute an object's index values; it is indexed under none",
			"index", name, "kind", kind, "namespace", obj.GetNamespace(), "name", obj.GetName())
		return nil
	}
}

// contentOf is the part of obj the path reads, as its JSON's map: only the
// top-level field the path starts in is decoded, since most paths read a
// small part of a large object.
func (e pathExpression) contentOf(obj client.Object) (map[string]any, error) {
	o, ok := obj.(*object.Object)
	if !ok || len(e.p) == 0 || e.p[0].field == "" {
		return contentOf(obj)
	}
	switch top := e.p[0].field; top {
	case "metadata":
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&o.ObjectMeta)
		return map[string]any{top: m}, err
	case "apiVersion", "kind":
		return map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind}, nil
	default:
		v, err := o.DecodeField(top)
		if err != nil || v == nil {
			return nil, err
		}
		return map[string]any{top: v}, nil
	}
}

// contentOf is obj as its JSON's map.
func contentOf(obj client.Object) (map[string]any, error) {
	switch o := obj.(type) {
	case *object.Object:
		u, err := o.Unstructured()
		if err != nil {
			return nil, err
		}
		return u.Object, nil
	case *unstructured.Unstructured:
		return o.Object, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	return m, nil
}
