package description

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func validResponse() *polyopv1alpha1.DescribeResponse {
	return &polyopv1alpha1.DescribeResponse{
		ProtocolVersion: ProtocolVersion,
		Name:            "widgets",
		SdkName:         "polyop-go",
		SdkVersion:      "0.3.0",
		Controllers: []*polyopv1alpha1.ControllerDescription{{
			Name:    "widget",
			ForKind: &polyopv1alpha1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
			Predicates: &polyopv1alpha1.Predicates{
				UpdateFilters: []polyopv1alpha1.UpdateFilter{
					polyopv1alpha1.UpdateFilter_UPDATE_FILTER_GENERATION_CHANGED,
					polyopv1alpha1.UpdateFilter_UPDATE_FILTER_GENERATION_CHANGED,
				},
				LabelSelector: "app=web",
			},
			Namespaces: []string{"a", "b"},
		}},
	}
}

func TestNewDescription(t *testing.T) {
	t.Parallel()
	d, err := NewDescription(validResponse())
	if err != nil {
		t.Fatal(err)
	}
	if d.SDKName != "polyop-go" || d.SDKVersion != "0.3.0" {
		t.Errorf("SDK %q %q, want polyop-go 0.3.0", d.SDKName, d.SDKVersion)
	}
	c := d.Controllers[0]
	if want := (schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}); c.GVK != want {
		t.Errorf("GVK = %v, want %v", c.GVK, want)
	}
	if c.MaxConcurrentReconciles != 1 {
		t.Errorf("MaxConcurrentReconciles = %d, want the default 1", c.MaxConcurrentReconciles)
	}
	if len(c.UpdateFilters) != 1 {
		t.Errorf("UpdateFilters = %v, want the duplicate folded", c.UpdateFilters)
	}
	if c.LabelSelector.String() != "app=web" {
		t.Errorf("LabelSelector = %q", c.LabelSelector)
	}
	if c.SkipUnchangedInputs {
		t.Errorf("SkipUnchangedInputs = true, want the default false")
	}
	r := validResponse()
	r.Controllers[0].SkipUnchangedInputs = true
	if d, err := NewDescription(r); err != nil || !d.Controllers[0].SkipUnchangedInputs {
		t.Errorf("a controller declaring skip_unchanged_inputs: %v, want it kept", err)
	}
}

func TestNewDescriptionKeepsWhatEachOwnedKindDeclares(t *testing.T) {
	t.Parallel()
	r := validResponse()
	r.Controllers[0].Owns = []*polyopv1alpha1.OwnedKind{
		{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, SendObserved: true, Adopt: true},
		{Kind: &polyopv1alpha1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, ReplaceOnImmutable: true},
	}
	d, err := NewDescription(r)
	if err != nil {
		t.Fatal(err)
	}
	want := []Owned{
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, SendObserved: true, Adopt: true},
		{GVK: schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, ReplaceOnImmutable: true},
	}
	if got := d.Controllers[0].Owns; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Owns = %+v, want %+v", got, want)
	}
}

func TestNewDescriptionRejects(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		change func(*polyopv1alpha1.DescribeResponse)
		want   string
	}{
		"if the protocol version differs, both versions are named": {
			change: func(r *polyopv1alpha1.DescribeResponse) { r.ProtocolVersion = 2 },
			want:   "the sidecar speaks 2, this host speaks PROTOCOL_VERSION_V1ALPHA1",
		},
		"if no protocol version is given, it says so": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.ProtocolVersion = polyopv1alpha1.ProtocolVersion_PROTOCOL_VERSION_UNSPECIFIED
			},
			want: "the sidecar speaks PROTOCOL_VERSION_UNSPECIFIED (it set no protocol_version), this host speaks PROTOCOL_VERSION_V1ALPHA1",
		},
		"if the name is missing": {
			change: func(r *polyopv1alpha1.DescribeResponse) { r.Name = "" },
			want:   "name: required",
		},
		"if there are no controllers": {
			change: func(r *polyopv1alpha1.DescribeResponse) { r.Controllers = nil },
			want:   "declares no controllers",
		},
		"if two controllers share a name": {
			change: func(r *polyopv1alpha1.DescribeResponse) { r.Controllers = append(r.Controllers, r.Controllers[0]) },
			want:   `controllers[1].name: duplicate controller name "widget"`,
		},
		"if the kind is missing": {
			change: func(r *polyopv1alpha1.DescribeResponse) { r.Controllers[0].ForKind.Kind = "" },
			want:   "controllers[0].for_kind.kind: required",
		},
		"if an update filter is unknown": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.Controllers[0].Predicates.UpdateFilters = []polyopv1alpha1.UpdateFilter{42}
			},
			want: "controllers[0].predicates.update_filters[0]: unknown update filter 42",
		},
		"if the label selector does not parse": {
			change: func(r *polyopv1alpha1.DescribeResponse) { r.Controllers[0].Predicates.LabelSelector = "a in (" },
			want:   "controllers[0].predicates.label_selector",
		},
		"if a namespace is not a valid name": {
			change: func(r *polyopv1alpha1.DescribeResponse) { r.Controllers[0].Namespaces = []string{"Not_Valid"} },
			want:   "controllers[0].namespaces[0]",
		},
		"if a finalizer has no domain prefix": {
			change: func(r *polyopv1alpha1.DescribeResponse) { r.Controllers[0].Finalizer = "cleanup" },
			want:   "controllers[0].finalizer: \"cleanup\" needs a domain prefix",
		},
		"if a watch says nothing of how to map its events": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.Controllers[0].Watches = []*polyopv1alpha1.Watch{{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}}
			},
			want: "controllers[0].watches[0]: one of label, annotation or field_path is required",
		},
		"if a field path has an empty segment": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.Controllers[0].Watches = []*polyopv1alpha1.Watch{{
					Kind:    &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
					Mapping: &polyopv1alpha1.Watch_FieldPath{FieldPath: "spec..name"},
				}}
			},
			want: "controllers[0].watches[0].field_path",
		},
		"if an owned kind is declared twice": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				cm := &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
				r.Controllers[0].Owns = []*polyopv1alpha1.OwnedKind{{Kind: cm}, {Kind: cm}}
			},
			want: "controllers[0].owns[1].kind",
		},
		"if a webhook neither defaults nor validates": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.Webhooks = []*polyopv1alpha1.WebhookDescription{{Kind: r.Controllers[0].ForKind}}
			},
			want: "webhooks[0]: neither default nor validate is set",
		},
		"if a webhook timeout is out of range": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.Webhooks = []*polyopv1alpha1.WebhookDescription{{Kind: r.Controllers[0].ForKind, Validate: true, TimeoutSeconds: 31}}
			},
			want: "webhooks[0].timeout_seconds: must be between 1 and 30",
		},
		"if a conversion names fewer than two versions": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.Conversions = []*polyopv1alpha1.ConversionDescription{{Kind: &polyopv1alpha1.GroupKind{Group: "example.com", Kind: "Widget"}, Versions: []string{"v1"}}}
			},
			want: "conversions[0].versions: at least two versions are required",
		},
		"if a conversion names one version twice, it is not two versions": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.Conversions = []*polyopv1alpha1.ConversionDescription{{Kind: &polyopv1alpha1.GroupKind{Group: "example.com", Kind: "Widget"}, Versions: []string{"v1", "v1"}}}
			},
			want: `conversions[0].versions[1]: "v1" is declared twice`,
		},
		"if a conversion's kind has no group, the path names kind.group": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.Conversions = []*polyopv1alpha1.ConversionDescription{{Kind: &polyopv1alpha1.GroupKind{Kind: "Widget"}, Versions: []string{"v1", "v2"}}}
			},
			want: "conversions[0].kind.group: required",
		},
		"if a conversion names no kind": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.Conversions = []*polyopv1alpha1.ConversionDescription{{Versions: []string{"v1", "v2"}}}
			},
			want: "conversions[0].kind.kind: required",
		},
		"if a conversion names a version that is not a version name": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.Conversions = []*polyopv1alpha1.ConversionDescription{{Kind: &polyopv1alpha1.GroupKind{Group: "example.com", Kind: "Widget"}, Versions: []string{"v1", ""}}}
			},
			want: `conversions[0].versions[1]: "" is not a valid version name`,
		},
		"if max_concurrent_reconciles is negative": {
			change: func(r *polyopv1alpha1.DescribeResponse) { r.Controllers[0].MaxConcurrentReconciles = -1 },
			want:   "controllers[0].max_concurrent_reconciles: must not be negative",
		},
		"if a controller that skips unchanged inputs declares watches": {
			change: func(r *polyopv1alpha1.DescribeResponse) {
				r.Controllers[0].SkipUnchangedInputs = true
				r.Controllers[0].Watches = []*polyopv1alpha1.Watch{{
					Kind:    &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"},
					Mapping: &polyopv1alpha1.Watch_Label{Label: "example.com/owner"},
				}}
			},
			want: "controllers[0].skip_unchanged_inputs: a controller that declares watches reads objects other than its inputs",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := validResponse()
			tc.change(r)
			_, err := NewDescription(r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestNewDescriptionDefaultsWebhooks(t *testing.T) {
	t.Parallel()
	r := validResponse()
	r.Webhooks = []*polyopv1alpha1.WebhookDescription{{Kind: r.Controllers[0].ForKind, Default: true}}
	d, err := NewDescription(r)
	if err != nil {
		t.Fatal(err)
	}
	w := d.Webhooks[0]
	if len(w.Operations) != 2 || w.FailurePolicy != polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL || w.TimeoutSeconds != 10 {
		t.Errorf("webhook = %+v, want create and update, Fail, 10s", w)
	}
}

func TestNarrow(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		declared, host, want []string
		wantErr              bool
	}{
		"if the host sets no namespaces, the declared ones stay":      {declared: []string{"a"}, want: []string{"a"}},
		"if the sidecar declares none, the host's apply":              {host: []string{"a"}, want: []string{"a"}},
		"if both declare namespaces, only the common ones stay":       {declared: []string{"a", "b"}, host: []string{"b", "c"}, want: []string{"b"}},
		"if nothing is common, it is an error rather than a widening": {declared: []string{"a"}, host: []string{"c"}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := &Description{Controllers: []Controller{{Name: "c", Namespaces: tc.declared, LabelSelector: labels.Everything()}}}
			err := d.Narrow(tc.host, nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Narrow error = %v, wantErr %v", err, tc.wantErr)
			}
			if !tc.wantErr && strings.Join(d.Controllers[0].Namespaces, ",") != strings.Join(tc.want, ",") {
				t.Errorf("namespaces = %v, want %v", d.Controllers[0].Namespaces, tc.want)
			}
		})
	}

	t.Run("a host label selector is added to the declared one", func(t *testing.T) {
		t.Parallel()
		declared, _ := labels.Parse("app=web")
		host, _ := labels.Parse("shard=1")
		d := &Description{Controllers: []Controller{{Name: "c", LabelSelector: declared}}}
		if err := d.Narrow(nil, host); err != nil {
			t.Fatal(err)
		}
		sel := d.Controllers[0].LabelSelector
		if !sel.Matches(labels.Set{"app": "web", "shard": "1"}) || sel.Matches(labels.Set{"app": "web"}) {
			t.Errorf("selector %q does not require both", sel)
		}
	})
}
