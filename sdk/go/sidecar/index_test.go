package sidecar_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

func TestDescribeCarriesTheDeclaredIndexesAndCachedKinds(t *testing.T) {
	t.Parallel()
	srv, err := sidecar.New(sidecar.Options{Name: "jobs"})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(srv.Index(&batchv1.Job{}, ".metadata.controller", sidecar.FieldPath(".metadata.ownerReferences[?(@.controller==true)].name")))
	must(srv.Index(&corev1.Pod{}, "spec.nodeName", sidecar.CEL("object.spec.nodeName")))
	must(srv.CacheKind(&corev1.Pod{}, sidecar.CacheOptions{
		Namespaces: []string{"a"}, Labels: labels.SelectorFromSet(labels.Set{"app": "web"}), Fields: fields.OneTermEqualSelector("status.phase", "Running"),
	}))
	resp := sidecartest.New(t, srv).Describe()
	want := &polyopv1alpha1.DescribeResponse{
		Indexes: []*polyopv1alpha1.IndexDescription{
			{Kind: &polyopv1alpha1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, Name: ".metadata.controller",
				Value: &polyopv1alpha1.IndexDescription_FieldPath{FieldPath: ".metadata.ownerReferences[?(@.controller==true)].name"}},
			{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Name: "spec.nodeName",
				Value: &polyopv1alpha1.IndexDescription_Cel{Cel: "object.spec.nodeName"}},
		},
		CachedKinds: []*polyopv1alpha1.CachedKind{
			{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespaces: []string{"a"}, LabelSelector: "app=web", FieldSelector: "status.phase=Running"},
		},
	}
	got := &polyopv1alpha1.DescribeResponse{Indexes: resp.GetIndexes(), CachedKinds: resp.GetCachedKinds()}
	if !proto.Equal(got, want) {
		t.Errorf("described\n%v\nwant\n%v", got, want)
	}
}

func TestIndexRefuses(t *testing.T) {
	t.Parallel()
	srv, err := sidecar.New(sidecar.Options{Name: "jobs"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Index(&batchv1.Job{}, "x", sidecar.FieldPath(".a")); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		err  error
		says string
	}{
		"if the name is taken on the kind, then it says so":   {srv.Index(&batchv1.Job{}, "x", sidecar.CEL("'a'")), `index "x" on Job is already declared`},
		"if the name is the owner-UID index, then it says so": {srv.Index(&batchv1.Job{}, sidecar.OwnerUIDIndex, sidecar.FieldPath(".a")), "the host keeps this index itself"},
		"if there is no value, then it names both forms":      {srv.Index(&batchv1.Job{}, "y", nil), "sidecar.FieldPath or sidecar.CEL"},
		"if the kind is declared twice, then it says so": {
			func() error {
				_ = srv.CacheKind(&corev1.Pod{}, sidecar.CacheOptions{})
				return srv.CacheKind(&corev1.Pod{}, sidecar.CacheOptions{})
			}(),
			"cached kind Pod is already declared"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.says) {
				t.Errorf("got %v, want an error saying %s", tc.err, tc.says)
			}
		})
	}
}
