package replica

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/testenv"
)

// Against an API server without the ShardedListAndWatch feature gate,
// --sharding=server stops the host at start, saying what to do.
func TestServerShardingNeedsTheAPIServersFeatureGate(t *testing.T) {
	env, err := testenv.StartWith(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	httpClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(env.Config, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	o := shardingOptions()
	o.Mode = ModeServer
	res := shardingResolved(description.Controller{Name: "cm", GVK: configMapGVK})
	res.Views = map[schema.GroupVersionKind]description.CacheView{configMapGVK: {Namespaces: []string{"default"}}}
	plan, err := NewPlan(res, o)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := New(env.Config, httpClient, plan, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = shards.CheckServed(t.Context(), env.Config, httpClient, mapper, res)
	if err == nil || !strings.Contains(err.Error(), "--sharding=server needs the API server's ShardedListAndWatch feature gate") || !strings.Contains(err.Error(), "use --sharding=labels") {
		t.Errorf("checkServed = %v, want the error naming the feature gate and --sharding=labels", err)
	}
}
