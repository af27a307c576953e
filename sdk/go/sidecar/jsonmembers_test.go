package sidecar

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stripChild is what a desired child goes through: its status dropped, and
// the server-set fields of its metadata.
func stripChild(data []byte) ([]byte, error) {
	return without(data, []string{"status"}, func(metadata []byte) ([]byte, error) {
		return without(metadata, serverSetMetadata, nil)
	})
}

// byMaps is what without does, read the plain way: every member decoded
// into a map, the dropped ones deleted. It is what without's output must
// decode to.
func byMaps(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	delete(obj, "status")
	if m, ok := obj["metadata"].(map[string]any); ok {
		for _, f := range serverSetMetadata {
			delete(m, f)
		}
	}
	return obj
}

func TestWithoutDropsTheMembersAndKeepsTheRestAsWritten(t *testing.T) {
	t.Parallel()
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "default", UID: "u-1", ResourceVersion: "42", Generation: 3,
			CreationTimestamp: created,
			Labels:            map[string]string{"app": "web", "quote\"d": "a\\b"},
			Annotations:       map[string]string{"status": "kept: only the top-level status goes"},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationApply}},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "o-1"}},
		},
		Data:       map[string]string{"index.html": "<h1>{\"nested\": [1, 2]}</h1>", "empty": ""},
		BinaryData: map[string][]byte{"logo": {0, 1, 2}},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u-2"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}}},
	}
	for name, obj := range map[string]any{"config map": cm, "service with a status": svc} {
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		checkStripped(t, name, data)
	}

	// The members stay in the order they were written in.
	got, err := without([]byte(`{"z":1,"status":{"a":[{"b":"}"}]},"a":"x","m":null}`), []string{"status"}, nil)
	if err != nil || string(got) != `{"z":1,"a":"x","m":null}` {
		t.Errorf("without = %s, %v", got, err)
	}
	got, err = without([]byte(` { "status" : 1 } `), []string{"status"}, nil)
	if err != nil || string(got) != `{}` {
		t.Errorf("without of an object with nothing left = %s, %v", got, err)
	}
	got, err = without([]byte(`{"st\u0061tus":1,"b":2}`), []string{"status"}, nil)
	if err != nil || string(got) != `{"b":2}` {
		t.Errorf("without of an escaped key = %s, %v", got, err)
	}
}

func TestWithoutRefusesWhatIsNotAnObject(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		``, `[]`, `"status"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":"x}`, `{"a":{"b":1}`,
		`{"a":[1}`, `{"a":1}x`, `{a:1}`,
	} {
		if got, err := without([]byte(bad), []string{"status"}, nil); !errors.Is(err, errNotAnObject) {
			t.Errorf("without(%q) = %s, %v; want an error", bad, got, err)
		}
	}
}

// FuzzWithout holds without to the plain reading for any JSON object: its
// output decodes to what deleting the members from the decoded object
// leaves.
func FuzzWithout(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","uid":"u","labels":{"x":"y"}},"data":{"k":"v"},"status":{}}`,
		`{"metadata":{"resourceVersion":"1","managedFields":[{"manager":"m"}]},"spec":[1,"2",{"3":[4]}],"status":"s"}`,
		`{"a":"\"}\\","b":[{"c":"]"}]}`,
		` {"status" : 1 , "x" : true } `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var obj map[string]any
		if json.Unmarshal(data, &obj) != nil || obj == nil {
			return
		}
		if m, ok := obj["metadata"]; ok {
			if _, isObject := m.(map[string]any); !isObject {
				return
			}
		}
		if hasDuplicateKeys(data) {
			return // encoding/json keeps the last; a scan keeps each
		}
		checkStripped(t, string(data), data)
	})
}

// checkStripped holds stripChild's output for data to the plain reading.
func checkStripped(t *testing.T, name string, data []byte) {
	t.Helper()
	got, err := stripChild(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var decoded map[string]any
	if err := json.Unmarshal(got, &decoded); err != nil {
		t.Fatalf("%s: the output %s is not JSON: %v", name, got, err)
	}
	if want := byMaps(t, data); !reflect.DeepEqual(decoded, want) {
		t.Fatalf("%s:\n got %v\nwant %v", name, decoded, want)
	}
}

// hasDuplicateKeys reports whether the object data, or its metadata, names
// a member twice.
func hasDuplicateKeys(data []byte) bool {
	dup := false
	var walk func([]byte, bool)
	walk = func(obj []byte, nested bool) {
		seen := map[string]bool{}
		_ = eachMember(obj, func(key, _, value []byte) error {
			dup = dup || seen[string(key)]
			seen[string(key)] = true
			if string(key) == "metadata" && !nested {
				walk(value, true)
			}
			return nil
		})
	}
	walk(data, false)
	return dup
}

func BenchmarkDesiredChildEncoding(b *testing.B) {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "widget-1", Namespace: "bench", Labels: map[string]string{"app.kubernetes.io/name": "widget"}},
		Data:       map[string]string{},
	}
	for i := range 4 {
		cm.Data[string(rune('a'+i))] = strings.Repeat("x", 128)
	}
	data, err := json.Marshal(cm)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := stripChild(data); err != nil {
			b.Fatal(err)
		}
	}
}
