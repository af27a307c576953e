package host

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/testenv"
)

var (
	configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretKind    = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	roleKind      = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
)

func TestClusterAddress(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		sidecar, cluster, want string
	}{
		"if unset beside the default sidecar socket, then the default":     {sidecar: sidecar.DefaultAddress, want: "unix:///var/run/polyop/cluster.sock"},
		"if unset beside another unix socket, then beside it":              {sidecar: "unix:///tmp/x/sidecar.sock", want: "unix:///tmp/x/cluster.sock"},
		"if unset beside a relative unix socket, then beside it, absolute": {sidecar: "unix:run/sidecar.sock", want: "unix://" + workingDir(t) + "/run/cluster.sock"},
		"if set to a relative unix socket, then absolute":                  {sidecar: sidecar.DefaultAddress, cluster: "unix:c.sock", want: "unix://" + workingDir(t) + "/c.sock"},
		"if unset with a TCP sidecar, then the default":                    {sidecar: "localhost:9000", want: "unix:///var/run/polyop/cluster.sock"},
		"if set, then as set": {sidecar: sidecar.DefaultAddress, cluster: "tcp://127.0.0.1:9001", want: "tcp://127.0.0.1:9001"},
		"if 0, then none":     {sidecar: sidecar.DefaultAddress, cluster: "0", want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := NewOptions()
			opts.SidecarAddress, opts.ClusterAddress = tc.sidecar, tc.cluster
			if got := clusterAddress(opts); got != tc.want {
				t.Errorf("clusterAddress = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResolveRelatedKinds(t *testing.T) {
	t.Parallel()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(widget, meta.RESTScopeNamespace)
	mapper.Add(configMapKind, meta.RESTScopeNamespace)
	mapper.Add(roleKind, meta.RESTScopeRoot)
	for name, tc := range map[string]struct {
		c    description.Controller
		want string
	}{
		"if every kind is served and the scopes fit, then no error": {
			c: description.Controller{Name: "w", GVK: widget, Owns: []description.Owned{{GVK: configMapKind}}, Watches: []description.Watch{{GVK: roleKind, FieldPath: []string{"spec", "role"}}}},
		},
		"if an owned kind is not served, then it is named": {
			c: description.Controller{Name: "w", GVK: widget, Owns: []description.Owned{{GVK: secretKind}}}, want: `controller "w" owns Secret.v1, which the API server does not serve`,
		},
		"if a watched kind is not served, then it is named": {
			c: description.Controller{Name: "w", GVK: widget, Watches: []description.Watch{{GVK: secretKind, Label: "x"}}}, want: `controller "w" watches Secret.v1, which the API server does not serve`,
		},
		"if a namespaced object owns a cluster-scoped kind, then an error": {
			c: description.Controller{Name: "w", GVK: widget, Owns: []description.Owned{{GVK: roleKind}}}, want: "a cluster-scoped object cannot have a namespaced owner",
		},
		"if a label on a cluster-scoped object names a namespaced one, then an error": {
			c: description.Controller{Name: "w", GVK: widget, Watches: []description.Watch{{GVK: roleKind, Annotation: "x"}}}, want: "watch it by field_path instead",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			namespaced := map[schema.GroupVersionKind]bool{widget: true}
			err := resolveRelatedKinds(mapper, describe(tc.c), namespaced)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !namespaced[configMapKind] || namespaced[roleKind] {
					t.Errorf("scopes %v, want ConfigMap namespaced and ClusterRole not", namespaced)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestAddRelatedCacheViews(t *testing.T) {
	t.Parallel()
	desc := describe(
		description.Controller{Name: "a", GVK: widget, Namespaces: []string{"team-a"},
			Owns: []description.Owned{{GVK: configMapKind}}, Watches: []description.Watch{{GVK: secretKind, Label: "x"}, {GVK: roleKind, FieldPath: []string{"spec", "r"}}}},
		description.Controller{Name: "b", GVK: cluster, Owns: []description.Owned{{GVK: roleKind}}},
		description.Controller{Name: "c", GVK: widget, Namespaces: []string{"team-a"}, Watches: []description.Watch{{GVK: configMapKind, Label: "y"}}},
		description.Controller{Name: "d", GVK: widget, Namespaces: []string{"team-b"}, Owns: []description.Owned{{GVK: secretKind}}},
		description.Controller{Name: "e", GVK: cluster, Watches: []description.Watch{{GVK: widget, FieldPath: []string{"spec", "w"}}}},
	)
	namespaced := map[schema.GroupVersionKind]bool{widget: true, cluster: false, configMapKind: true, secretKind: true, roleKind: false}
	opts := NewOptions()
	o, err := cacheOptions(describe(desc.Controllers[0]), namespaced, opts)
	if err != nil {
		t.Fatal(err)
	}
	addRelatedCacheViews(&o, desc, namespaced, false)
	views := cachedKinds(o)
	for gvk, want := range map[schema.GroupVersionKind][]string{
		widget:        {"team-a"},           // reconciled: its own view, even though e watches it
		configMapKind: {"team-a"},           // owned by a and watched by c, both in team-a
		secretKind:    {"team-a", "team-b"}, // watched by a, owned by d
		roleKind:      nil,                  // cluster-scoped
	} {
		got, ok := views[gvk]
		if !ok {
			t.Errorf("%s has no cache view", gvk.Kind)
			continue
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s is cached in %v, want %v", gvk.Kind, got, want)
		}
	}
	if n := len(views); n != 4 {
		t.Errorf("%d kinds cached, want 4: %v", n, slices.Collect(maps.Keys(views)))
	}
	for obj, by := range o.ByObject {
		if gvk := obj.GetObjectKind().GroupVersionKind(); gvk != widget && by.Label != nil {
			t.Errorf("%s carries a label selector; only reconciled kinds do", gvk.Kind)
		}
	}

	// One controller watching every namespace widens the view to all.
	all := describe(
		description.Controller{Name: "a", GVK: widget, Namespaces: []string{"team-a"}, Owns: []description.Owned{{GVK: configMapKind}}},
		description.Controller{Name: "z", GVK: cluster, Watches: []description.Watch{{GVK: configMapKind, FieldPath: []string{"spec", "c"}}}},
	)
	o = cache.Options{ByObject: map[client.Object]cache.ByObject{}}
	addRelatedCacheViews(&o, all, namespaced, false)
	if got := cachedKinds(o)[configMapKind]; got != nil {
		t.Errorf("ConfigMaps cached in %v, want every namespace", got)
	}
}

// workingDir is the test's working directory, against which relative unix
// socket paths are resolved.
func workingDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWatchedNamespaces(t *testing.T) {
	t.Parallel()
	ctrl := func(namespaces ...string) description.Controller {
		return description.Controller{Name: "c", Namespaces: namespaces}
	}
	for name, tc := range map[string]struct {
		controllers []description.Controller
		flag        []string
		want        []string
	}{
		"if every controller watches namespaces, then all of them":      {controllers: []description.Controller{ctrl("b", "a"), ctrl("c", "a")}, want: []string{"a", "b", "c"}},
		"if a controller watches every namespace, then every namespace": {controllers: []description.Controller{ctrl("a"), ctrl()}, want: nil},
		"if there is no controller, then --namespace":                   {flag: []string{"ops"}, want: []string{"ops"}},
		"if there is no controller and no --namespace, then every one":  {want: nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := NewOptions()
			opts.Namespaces = tc.flag
			if got := watchedNamespaces(&description.Description{Controllers: tc.controllers}, opts); !slices.Equal(got, tc.want) {
				t.Errorf("watchedNamespaces = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClusterServiceTLS(t *testing.T) {
	t.Parallel()
	m := testenv.NewMutualTLS(t)
	for name, tc := range map[string]struct {
		address, cert, key, ca string
		wantTLS                bool
		wantErr                []string
	}{
		"if the address is a unix socket, then plain text":            {address: "unix:///tmp/c.sock"},
		"if the address is loopback, then plain text":                 {address: "tcp://127.0.0.1:9000"},
		"if no cluster service is served, then nothing":               {address: "0"},
		"if the address is on the network without TLS, then refused":  {address: "tcp://0.0.0.0:9000", wantErr: []string{"--cluster-address=tcp://0.0.0.0:9000", "--cluster-tls-cert-file, --cluster-tls-key-file and --cluster-tls-client-ca-file"}},
		"if the address is every interface without TLS, then refused": {address: ":9000", wantErr: []string{"--cluster-tls-cert-file"}},
		"if the address is on the network with TLS, then mutual TLS":  {address: "tcp://0.0.0.0:9000", cert: m.ServerCertFile, key: m.ServerKeyFile, ca: m.CAFile, wantTLS: true},
		"if some TLS flags are set but not all, then refused":         {address: "tcp://0.0.0.0:9000", cert: m.ServerCertFile, key: m.ServerKeyFile, wantErr: []string{"all of", "or none"}},
		"if a TLS file cannot be read, then refused":                  {address: "tcp://0.0.0.0:9000", cert: "/nonexistent.crt", key: m.ServerKeyFile, ca: m.CAFile, wantErr: []string{"certificate"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := NewOptions()
			opts.ClusterAddress, opts.ClusterTLSCertFile, opts.ClusterTLSKeyFile, opts.ClusterTLSClientCAFile = tc.address, tc.cert, tc.key, tc.ca
			cfg, err := clusterServiceTLS(opts)
			if len(tc.wantErr) > 0 {
				for _, want := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("error = %v, want one containing %q", err, want)
					}
				}
				return
			}
			if err != nil || (cfg != nil) != tc.wantTLS {
				t.Errorf("clusterServiceTLS = %v, %v; want TLS %v", cfg, err, tc.wantTLS)
			}
		})
	}
}
