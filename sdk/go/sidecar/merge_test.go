package sidecar

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

type mergeSpec struct {
	Size  int64             `json:"size,omitempty"`
	Tags  []string          `json:"tags,omitempty"`
	Extra map[string]string `json:"extra,omitempty"`
}

type mergeObj struct {
	metav1.TypeMeta `json:",inline"`
	Spec            mergeSpec `json:"spec"`
}

func (o *mergeObj) DeepCopyObject() runtime.Object {
	c := *o
	c.Spec.Tags = append([]string(nil), o.Spec.Tags...)
	return &c
}

func TestApplyChangesAppliesOnlyTheDefaultersChanges(t *testing.T) {
	t.Parallel()
	type spec = mergeSpec
	type obj = mergeObj
	for name, tc := range map[string]struct {
		raw           string
		before, after obj
		want          string
	}{
		"if a field is set, then it is added after the unknown ones, which keep their order": {
			raw:    `{"spec":{"unknown":1},"status":{"x":true}}`,
			before: obj{}, after: obj{Spec: spec{Size: 3}},
			want: `{"spec":{"unknown":1,"size":3},"status":{"x":true}}`,
		},
		"if a field is cleared, then it is removed": {
			raw:    `{"spec":{"size":3,"unknown":1}}`,
			before: obj{Spec: spec{Size: 3}}, after: obj{},
			want: `{"spec":{"unknown":1}}`,
		},
		"if a list changes, then it is replaced": {
			raw:    `{"spec":{"tags":["a"]}}`,
			before: obj{Spec: spec{Tags: []string{"a"}}}, after: obj{Spec: spec{Tags: []string{"a", "b"}}},
			want: `{"spec":{"tags":["a","b"]}}`,
		},
		"if a zero value the type leaves out is in the raw object, then it stays": {
			raw:    `{"spec":{"size":0,"extra":{}}}`,
			before: obj{}, after: obj{Spec: spec{Tags: []string{"t"}}},
			want: `{"spec":{"size":0,"extra":{},"tags":["t"]}}`,
		},
		"if the raw object lacks the member the change is in, then it is created": {
			raw:    `{"metadata":{"name":"x"}}`,
			before: obj{}, after: obj{Spec: spec{Extra: map[string]string{"a": "b"}}},
			want: `{"metadata":{"name":"x"},"spec":{"extra":{"a":"b"}}}`,
		},
		"if a map entry is removed, then only that entry goes": {
			raw:    `{"spec":{"extra":{"a":"1","b":"2","unknown":true}}}`,
			before: obj{Spec: spec{Extra: map[string]string{"a": "1", "b": "2"}}}, after: obj{Spec: spec{Extra: map[string]string{"a": "1"}}},
			want: `{"spec":{"extra":{"a":"1","unknown":true}}}`,
		},
		"if nothing changes, then the raw object is returned as it is": {
			raw:    `{ "spec" : {"size":3} }`,
			before: obj{Spec: spec{Size: 3}}, after: obj{Spec: spec{Size: 3}},
			want: `{ "spec" : {"size":3} }`,
		},
		"if a big integer is in the raw object, then it keeps every digit": {
			raw:    `{"spec":{"id":9007199254740993}}`,
			before: obj{}, after: obj{Spec: spec{Size: 1}},
			want: `{"spec":{"id":9007199254740993,"size":1}}`,
		},
		"if the defaulter sets a big integer, then it keeps every digit": {
			raw:    `{"spec":{}}`,
			before: obj{}, after: obj{Spec: spec{Size: 9007199254740993}},
			want: `{"spec":{"size":9007199254740993}}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := applyChanges([]byte(tc.raw), &tc.before, &tc.after)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
