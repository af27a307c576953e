package render

import (
	"strings"
	"testing"
)

func TestReadObjects(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		content   string
		wantNames []string
		wantLines []int
		wantErr   string
	}{
		"if the file is a stream, each document is an object, with the line it starts on": {
			content:   "# leading comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n# only a comment\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n",
			wantNames: []string{"a", "b"},
			wantLines: []int{3, 10},
		},
		"if a document is a List, its items are the objects": {
			content:   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n",
			wantNames: []string{"a", "b"},
			wantLines: []int{1, 1},
		},
		"if the file is JSON, it is read too": {
			content:   `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"}}`,
			wantNames: []string{"j"},
			wantLines: []int{1},
		},
		"if a later document is malformed, the error names the file's line, not the document's": {
			content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [b\n",
			wantErr: ":9: malformed YAML: yaml: ",
		},
		"if a tab indents a line, the error names it": {
			content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: a\n",
			wantErr: ":4: malformed YAML: yaml: found character that cannot start any token",
		},
		"if a document has no kind, the error says both apiVersion and kind are required": {
			content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nmetadata:\n  name: b\n",
			wantErr: ":6: the object has no apiVersion or no kind: both are required",
		},
		"if a document is not a mapping, the error says what an object is": {
			content: "- a\n- b\n",
			wantErr: ":1: the document is not a Kubernetes object",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, "objects.yaml", tc.content)
			objs, err := readObjects(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), path+tc.wantErr) {
					t.Fatalf("error = %v; want %q", err, path+tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var lines []int
			for _, o := range objs {
				names = append(names, o.GetName())
				lines = append(lines, o.Line)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantNames, ",") || len(lines) != len(tc.wantLines) {
				t.Fatalf("objects %v at lines %v; want %v at %v", names, lines, tc.wantNames, tc.wantLines)
			}
			for i := range lines {
				if lines[i] != tc.wantLines[i] {
					t.Errorf("object %s at line %d, want %d", names[i], lines[i], tc.wantLines[i])
				}
			}
		})
	}
}

func TestReadObjectTakesOne(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "two.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n")
	_, err := readObject(path)
	want := path + ` holds 2 objects (ConfigMap "a" (line 1), Secret "b" (line 6)): give one`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v; want %q", err, want)
	}
}
