package index

import (
	"errors"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
)

// CELCostLimit bounds one evaluation of an index's CEL expression, in CEL's
// cost units: the API server's own limit for one validation rule
// (PerCallLimit in k8s.io/apiserver/pkg/apis/cel), so that an expression
// that is fine in a CRD's x-kubernetes-validations is fine here.
const CELCostLimit = 1_000_000

// celProgram is a compiled CEL expression over the variable "object".
type celProgram struct {
	prg cel.Program
}

// celEnv is the environment every index expression compiles in: the variable
// "object" (the object as its JSON), with CEL's standard library and the
// string extensions the API server offers.
func celEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("object", cel.DynType),
		ext.Strings(),
		cel.OptionalTypes(),
	)
}

// compileCEL compiles expr, which must return a string or a list of strings
// (or dyn, checked at evaluation), and bounds its evaluations by costLimit.
func compileCEL(expr string, costLimit uint64) (*celProgram, error) {
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	switch out := ast.OutputType(); {
	case out.IsExactType(types.StringType), out.IsExactType(types.DynType),
		out.IsExactType(types.NewListType(types.StringType)), out.IsExactType(types.NewListType(types.DynType)):
	default:
		return nil, fmt.Errorf("the expression returns %s, not a string or a list of strings", out)
	}
	prg, err := env.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		return nil, err
	}
	return &celProgram{prg: prg}, nil
}

// values evaluates the program over obj.
func (p *celProgram) values(obj map[string]any) (out []string, err error) {
	// cel-go reports its own failures as errors; a panic in a type adapter
	// must still not stop the host's cache.
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("evaluation panicked: %v", r)
		}
	}()
	v, _, err := p.prg.Eval(map[string]any{"object": obj})
	if err != nil {
		return nil, err
	}
	return celStrings(v)
}

// celStrings turns a CEL string, or list of strings, into Go strings; null
// gives none.
func celStrings(v ref.Val) ([]string, error) {
	switch v := v.(type) {
	case types.String:
		return []string{string(v)}, nil
	case types.Null:
		return nil, nil
	case traits.Lister:
		var out []string
		it := v.Iterator()
		for it.HasNext() == types.True {
			item := it.Next()
			s, ok := item.(types.String)
			if !ok {
				return nil, fmt.Errorf("the expression returned a list holding %s, not only strings", item.Type())
			}
			out = append(out, string(s))
		}
		return out, nil
	case *types.Err:
		return nil, errors.New(v.String())
	}
	return nil, fmt.Errorf("the expression returned %s, not a string or a list of strings", v.Type())
}
