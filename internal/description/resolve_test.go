package description

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	widgetKind    = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	clusterKind   = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "ClusterThing"}
	configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretKind    = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	roleKind      = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
)

// testMapper serves Widgets, ConfigMaps and Secrets in namespaces, and
// ClusterThings and ClusterRoles cluster-wide.
func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{widgetKind.GroupVersion()})
	for _, gvk := range []schema.GroupVersionKind{widgetKind, configMapKind, secretKind} {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	m.Add(clusterKind, meta.RESTScopeRoot)
	m.Add(roleKind, meta.RESTScopeRoot)
	return m
}

func describe(cs ...Controller) *Description {
	for i := range cs {
		if cs[i].LabelSelector == nil {
			cs[i].LabelSelector = labels.Everything()
		}
	}
	return &Description{Name: "s", Controllers: cs}
}

func TestResolveLooksEveryKindUpOnce(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		c    Controller
		want string
	}{
		"if every kind is served and the scopes fit, then no error": {
			c: Controller{Name: "w", GVK: widgetKind, Owns: []Owned{{GVK: configMapKind}}, Watches: []Watch{{GVK: roleKind, FieldPath: []string{"spec", "role"}}}},
		},
		"if the reconciled kind is not served, then it is named": {
			c: Controller{Name: "w", GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}}, want: `controller "w" reconciles Gadget.example.com/v1, which the API server does not serve`,
		},
		"if a cluster-scoped kind declares namespaces, then an error": {
			c: Controller{Name: "c", GVK: clusterKind, Namespaces: []string{"a"}}, want: `controller "c" declares namespaces for ClusterThing.example.com/v1, which is cluster-scoped`,
		},
		"if an owned kind is not served, then it is named": {
			c: Controller{Name: "w", GVK: widgetKind, Owns: []Owned{{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}}}}, want: `controller "w" owns Pod.v1, which the API server does not serve`,
		},
		"if a watched kind is not served, then it is named": {
			c: Controller{Name: "w", GVK: widgetKind, Watches: []Watch{{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Label: "x"}}}, want: `controller "w" watches Pod.v1, which the API server does not serve`,
		},
		"if a namespaced object owns a cluster-scoped kind, then an error": {
			c: Controller{Name: "w", GVK: widgetKind, Owns: []Owned{{GVK: roleKind}}}, want: "a cluster-scoped object cannot have a namespaced owner",
		},
		"if a label on a cluster-scoped object names a namespaced one, then an error": {
			c: Controller{Name: "w", GVK: widgetKind, Watches: []Watch{{GVK: roleKind, Annotation: "x"}}}, want: "watch it by field_path instead",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, err := Resolve(testMapper(), describe(tc.c), ResolveOptions{})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				want := map[schema.GroupVersionKind]Kind{
					widgetKind:    {GVK: widgetKind, Resource: "widgets", Namespaced: true},
					configMapKind: {GVK: configMapKind, Resource: "configmaps", Namespaced: true},
					roleKind:      {GVK: roleKind, Resource: "clusterroles"},
				}
				if !maps.Equal(res.Kinds, want) {
					t.Errorf("Kinds = %v, want %v", res.Kinds, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestResolveNarrowsNamespacedKindsOnlyAndLeavesTheDescriptionAlone(t *testing.T) {
	t.Parallel()
	desc := describe(
		Controller{Name: "w", GVK: widgetKind},
		Controller{Name: "c", GVK: clusterKind},
	)
	sel, _ := labels.Parse("shard=1")
	res, err := Resolve(testMapper(), desc, ResolveOptions{Namespaces: []string{"team-a"}, LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Controllers[0].Namespaces; !slices.Equal(got, []string{"team-a"}) {
		t.Errorf("namespaced kind watches %v, want [team-a]", got)
	}
	if got := res.Controllers[1].Namespaces; len(got) != 0 {
		t.Errorf("cluster-scoped kind watches namespaces %v, want none", got)
	}
	for _, c := range res.Controllers {
		if c.LabelSelector.String() != "shard=1" {
			t.Errorf("controller %s selector = %q, want shard=1", c.Name, c.LabelSelector)
		}
	}
	if len(desc.Controllers[0].Namespaces) != 0 || !desc.Controllers[0].LabelSelector.Empty() {
		t.Errorf("Resolve changed the description it was given: %+v", desc.Controllers[0])
	}
	if v := res.Views[widgetKind]; !slices.Equal(v.Namespaces, []string{"team-a"}) || v.Labels.String() != "shard=1" {
		t.Errorf("Widget view = %+v", v)
	}
}

func TestResolveRefusesANamespaceNoControllerMayWatch(t *testing.T) {
	t.Parallel()
	_, err := Resolve(testMapper(), describe(Controller{Name: "w", GVK: widgetKind, Namespaces: []string{"a"}}), ResolveOptions{Namespaces: []string{"b"}})
	if err == nil || !strings.Contains(err.Error(), `controller "w" watches namespaces [a], none of which the host may watch ([b])`) {
		t.Errorf("error = %v", err)
	}
}

func TestResolveGivesEveryCachedKindItsView(t *testing.T) {
	t.Parallel()
	desc := describe(
		Controller{Name: "a", GVK: widgetKind, Namespaces: []string{"team-a"},
			Owns: []Owned{{GVK: configMapKind}}, Watches: []Watch{{GVK: secretKind, Label: "x"}, {GVK: roleKind, FieldPath: []string{"spec", "r"}}}},
		Controller{Name: "b", GVK: clusterKind, Owns: []Owned{{GVK: roleKind}}},
		Controller{Name: "c", GVK: widgetKind, Namespaces: []string{"team-a"}, Watches: []Watch{{GVK: configMapKind, Label: "y"}}},
		Controller{Name: "e", GVK: clusterKind, Watches: []Watch{{GVK: widgetKind, FieldPath: []string{"spec", "w"}}}},
	)
	desc.Controllers[0].LabelSelector, _ = labels.Parse("app=web")
	desc.Controllers[2].LabelSelector = desc.Controllers[0].LabelSelector
	res, err := Resolve(testMapper(), desc, ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for gvk, want := range map[schema.GroupVersionKind][]string{
		widgetKind:    {"team-a"}, // reconciled: its own view, even though e watches it
		configMapKind: {"team-a"}, // owned by a and watched by c, both in team-a
		secretKind:    {"team-a"}, // watched by a
		roleKind:      nil,        // cluster-scoped
		clusterKind:   nil,        // cluster-scoped
	} {
		got, ok := res.Views[gvk]
		if !ok {
			t.Errorf("%s has no cache view", gvk.Kind)
			continue
		}
		if !slices.Equal(got.Namespaces, want) {
			t.Errorf("%s is cached in %v, want %v", gvk.Kind, got.Namespaces, want)
		}
		if wantLabels := gvk == widgetKind; (got.Labels != nil) != wantLabels {
			t.Errorf("%s carries label selector %v; only reconciled kinds with one do", gvk.Kind, got.Labels)
		}
	}
	if n := len(res.Views); n != 5 {
		t.Errorf("%d kinds cached, want 5: %v", n, slices.Collect(maps.Keys(res.Views)))
	}
	if got, want := res.WatchedKinds(), []schema.GroupVersionKind{widgetKind, configMapKind, secretKind, roleKind, clusterKind}; !slices.Equal(got, want) {
		t.Errorf("WatchedKinds = %v, want %v", got, want)
	}

	t.Run("a kind owned in two namespaces is cached in both", func(t *testing.T) {
		t.Parallel()
		res, err := Resolve(testMapper(), describe(
			Controller{Name: "a", GVK: widgetKind, Namespaces: []string{"team-b"}, Owns: []Owned{{GVK: secretKind}}},
			Controller{Name: "b", GVK: widgetKind, Namespaces: []string{"team-b"}, Watches: []Watch{{GVK: secretKind, Label: "x"}}},
			Controller{Name: "z", GVK: clusterKind, Owns: []Owned{{GVK: roleKind}}},
		), ResolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Views[secretKind].Namespaces; !slices.Equal(got, []string{"team-b"}) {
			t.Errorf("Secrets cached in %v, want [team-b]", got)
		}
	})
	t.Run("one controller watching every namespace widens the view to all", func(t *testing.T) {
		t.Parallel()
		res, err := Resolve(testMapper(), describe(
			Controller{Name: "a", GVK: widgetKind, Namespaces: []string{"team-a"}, Owns: []Owned{{GVK: configMapKind}}},
			Controller{Name: "z", GVK: clusterKind, Watches: []Watch{{GVK: configMapKind, FieldPath: []string{"spec", "c"}}}},
		), ResolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Views[configMapKind].Namespaces; got != nil {
			t.Errorf("ConfigMaps cached in %v, want every namespace", got)
		}
	})
	t.Run("two controllers of one kind must agree on what to cache", func(t *testing.T) {
		t.Parallel()
		_, err := Resolve(testMapper(), describe(
			Controller{Name: "one", GVK: widgetKind, Namespaces: []string{"a"}},
			Controller{Name: "two", GVK: widgetKind, Namespaces: []string{"b"}},
		), ResolveOptions{})
		if err == nil || !strings.Contains(err.Error(), `controllers "one" and "two"`) {
			t.Errorf("error = %v", err)
		}
	})
}

func TestWatchedNamespaces(t *testing.T) {
	t.Parallel()
	ctrl := func(namespaces ...string) Controller {
		return Controller{Name: "c", GVK: widgetKind, Namespaces: namespaces, LabelSelector: labels.Everything()}
	}
	for name, tc := range map[string]struct {
		controllers []Controller
		flag        []string
		want        []string
	}{
		"if every controller watches namespaces, then all of them":      {controllers: []Controller{ctrl("b", "a")}, want: []string{"a", "b"}},
		"if a controller watches every namespace, then every namespace": {controllers: []Controller{ctrl()}, want: nil},
		"if the host narrows them, then as narrowed":                    {controllers: []Controller{ctrl("b", "a")}, flag: []string{"a"}, want: []string{"a"}},
		"if there is no controller, then the host's namespaces":         {flag: []string{"ops"}, want: []string{"ops"}},
		"if there is no controller and no host namespaces, then every":  {want: nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			desc := &Description{Name: "s", Controllers: tc.controllers}
			if len(tc.controllers) == 0 {
				desc.Conversions = []Conversion{{GroupKind: widgetKind.GroupKind(), Versions: []string{"v1", "v2"}}}
			}
			res, err := Resolve(testMapper(), desc, ResolveOptions{Namespaces: tc.flag})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.WatchedNamespaces(); !slices.Equal(got, tc.want) {
				t.Errorf("WatchedNamespaces = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestResolveWebhooksAndConversions(t *testing.T) {
	t.Parallel()
	desc := &Description{
		Name:        "widgets",
		Webhooks:    []Webhook{{GVK: widgetKind, Validate: true}},
		Conversions: []Conversion{{GroupKind: widgetKind.GroupKind(), Versions: []string{"v1", "v2"}}},
	}
	res, err := Resolve(testMapper(), desc, ResolveOptions{ServiceNamespace: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	wh := res.Webhooks[0]
	if wh.Resource != "widgets" {
		t.Errorf("webhook = %+v, want resource widgets", wh)
	}
	if desc.Webhooks[0].Resource != "" {
		t.Error("Resolve changed the description it was given")
	}
	if got := strings.Join(res.CRDNames(), ","); got != "widgets.example.com" {
		t.Errorf("CRDNames = %s", got)
	}
	if res.Service != (Service{Name: "widgets-webhook", Namespace: "ops"}) {
		t.Errorf("Service = %+v", res.Service)
	}

	desc.Webhooks = append(desc.Webhooks, Webhook{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}})
	desc.Webhooks[0].Resource = "widgetz"
	desc.Conversions = append(desc.Conversions, Conversion{GroupKind: schema.GroupKind{Group: "example.com", Kind: "Gadget"}, Versions: []string{"v1", "v2"}})
	_, err = Resolve(testMapper(), desc, ResolveOptions{})
	for _, want := range []string{
		"the sidecar declares a webhook for Gadget.example.com/v1, which the API server does not serve",
		`with resource "widgetz", but the API server serves it as "widgets"`,
		"the sidecar converts Gadget.example.com, which the API server does not serve",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
}

func TestResolveLeavesWebhookKindsAloneWhenWebhooksAreOff(t *testing.T) {
	t.Parallel()
	gadget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}
	desc := &Description{
		Name:        "s",
		Webhooks:    []Webhook{{GVK: gadget, Validate: true}},
		Conversions: []Conversion{{GroupKind: gadget.GroupKind(), Versions: []string{"v1", "v2"}}},
	}
	if _, err := Resolve(testMapper(), desc, ResolveOptions{}); err == nil {
		t.Fatal("an unserved webhook kind was accepted")
	}
	if _, err := Resolve(testMapper(), desc, ResolveOptions{WebhooksOff: true}); err != nil {
		t.Errorf("with webhooks off: %v", err)
	}
}

// TestTheWebhookServiceNamespaceIsOneRule: without a namespace given, the
// Service is in $POD_NAMESPACE, else the service account's namespace, else
// "default".
func TestTheWebhookServiceNamespaceIsOneRule(t *testing.T) {
	saFile := filepath.Join(t.TempDir(), "namespace")
	old := serviceAccountNamespaceFile
	serviceAccountNamespaceFile = saFile
	t.Cleanup(func() { serviceAccountNamespaceFile = old })
	desc := &Description{Name: "widgets", Webhooks: []Webhook{{GVK: widgetKind, Validate: true}}}
	service := func(opts ResolveOptions) Service {
		t.Helper()
		res, err := Resolve(testMapper(), desc, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res.Service
	}

	t.Setenv("POD_NAMESPACE", "")
	if got := service(ResolveOptions{}); got != (Service{Name: "widgets-webhook", Namespace: "default"}) {
		t.Errorf("outside a pod: %+v, want widgets-webhook in default", got)
	}
	if err := os.WriteFile(saFile, []byte("from-sa\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := service(ResolveOptions{}).Namespace; got != "from-sa" {
		t.Errorf("with a service account: %s, want from-sa", got)
	}
	t.Setenv("POD_NAMESPACE", "from-env")
	if got := service(ResolveOptions{}).Namespace; got != "from-env" {
		t.Errorf("with $POD_NAMESPACE: %s, want from-env", got)
	}
	if got := service(ResolveOptions{ServiceName: "svc", ServiceNamespace: "given"}); got != (Service{Name: "svc", Namespace: "given"}) {
		t.Errorf("given: %+v", got)
	}
}

func TestGuessingMapper(t *testing.T) {
	t.Parallel()
	desc := &Description{
		Name: "s",
		Controllers: []Controller{{Name: "w", GVK: widgetKind, LabelSelector: labels.Everything(),
			Owns: []Owned{{GVK: configMapKind}}, Watches: []Watch{{GVK: roleKind, FieldPath: []string{"spec", "r"}}}}},
		Webhooks:    []Webhook{{GVK: widgetKind, Resource: "widgetses", Validate: true}},
		Conversions: []Conversion{{GroupKind: widgetKind.GroupKind(), Versions: []string{"v1", "v2"}}},
	}
	res, err := Resolve(GuessingMapper(desc), desc, ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if k := res.Kinds[widgetKind]; k.Resource != "widgetses" || !k.Namespaced {
		t.Errorf("Widget = %+v, want the declared resource, namespaced", k)
	}
	if k := res.Kinds[configMapKind]; k.Resource != "configmaps" || !k.Namespaced {
		t.Errorf("ConfigMap = %+v, want the guessed resource, namespaced", k)
	}
	if k := res.Kinds[roleKind]; k.Resource != "clusterroles" || k.Namespaced {
		t.Errorf("ClusterRole = %+v, want cluster-scoped", k)
	}
	if got := strings.Join(res.CRDNames(), ","); got != "widgetses.example.com" {
		t.Errorf("CRDNames = %s", got)
	}
}
