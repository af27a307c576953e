package admission

import (
	"net/http"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyop/polyop/internal/description"
)

// recordingRegistrar records the paths registered and their handlers.
type recordingRegistrar map[string]http.Handler

func (r recordingRegistrar) Register(path string, h http.Handler) {
	if _, ok := r[path]; ok {
		panic("duplicate path " + path)
	}
	r[path] = h
}

// TestRegisterServesControllerRuntimesPathsAndTheOldOnes checks the paths:
// controller-runtime's first, then the ones configurations written before
// name, each alias served by the handler of the path it stands for.
func TestRegisterServesControllerRuntimesPathsAndTheOldOnes(t *testing.T) {
	t.Parallel()
	r := recordingRegistrar{}
	paths := Register(r, nil, []description.Webhook{
		{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Default: true, Validate: true},
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Validate: true},
	}, Options{})
	want := []string{
		"/mutate-example-com-v1-widget", "/validate-example-com-v1-widget", "/validate--v1-pod",
		"/default-example-com-v1-widget", "/validate-core-v1-pod",
	}
	if !slices.Equal(paths, want) {
		t.Errorf("Register returned %v, want %v", paths, want)
	}
	for alias, path := range map[string]string{
		"/default-example-com-v1-widget": "/mutate-example-com-v1-widget",
		"/validate-core-v1-pod":          "/validate--v1-pod",
	} {
		if r[alias] == nil || r[alias] != r[path] {
			t.Errorf("%s is served by %v, want the handler of %s (%v)", alias, r[alias], path, r[path])
		}
	}
}
