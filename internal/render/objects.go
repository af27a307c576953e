package render

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// fileObject is an object read from a file, with where it starts, for
// messages.
type fileObject struct {
	*unstructured.Unstructured
	// Path and Line are the file and the line its document starts on.
	Path string
	Line int
}

func (o fileObject) where() string { return fmt.Sprintf("%s:%d", o.Path, o.Line) }

// ReadObjects reads the Kubernetes objects of a YAML (or JSON) file as
// readObjects does, without where each starts: polyop run reads the
// project's manifests with it.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	objs, err := readObjects(path)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.Unstructured)
	}
	return out, nil
}

// readObjects reads the Kubernetes objects of a YAML (or JSON) file: a
// stream of documents separated by "---" lines, each an object or a List of
// objects (kind: List, or any kind ending in List with items). Documents that
// hold nothing (comments only) are skipped. An error names the file and the
// line.
func readObjects(path string) ([]fileObject, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []fileObject
	for _, doc := range splitDocuments(string(data)) {
		raw, err := yaml.YAMLToJSON([]byte(doc.text))
		if err != nil {
			return nil, yamlError(path, doc.line, err)
		}
		var content any
		if err := json.Unmarshal(raw, &content); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, doc.line, err)
		}
		if content == nil {
			continue
		}
		m, ok := content.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s:%d: the document is not a Kubernetes object (a mapping with apiVersion, kind and metadata)", path, doc.line)
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return nil, fmt.Errorf("%s:%d: the object has no apiVersion or no kind: both are required", path, doc.line)
		}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %s: %w", path, doc.line, u.GetKind(), err)
			}
			for i := range list.Items {
				item := &list.Items[i]
				if item.GetAPIVersion() == "" || item.GetKind() == "" {
					return nil, fmt.Errorf("%s:%d: items[%d] of the %s has no apiVersion or no kind: both are required", path, doc.line, i, u.GetKind())
				}
				out = append(out, fileObject{Unstructured: item, Path: path, Line: doc.line})
			}
			continue
		}
		out = append(out, fileObject{Unstructured: u, Path: path, Line: doc.line})
	}
	return out, nil
}

// document is one YAML document of a stream and the line it starts on.
type document struct {
	text string
	line int
}

// splitDocuments splits a YAML stream at its "---" lines.
func splitDocuments(data string) []document {
	var docs []document
	lines := strings.SplitAfter(data, "\n")
	start, cur := 1, strings.Builder{}
	for i, l := range lines {
		trimmed := strings.TrimRight(l, " \t\r\n")
		if trimmed == "---" || strings.HasPrefix(trimmed, "--- ") {
			docs = append(docs, document{text: cur.String(), line: start})
			cur.Reset()
			start = i + 2
			continue
		}
		cur.WriteString(l)
	}
	return append(docs, document{text: cur.String(), line: start})
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

// yamlError turns a YAML parser's error, whose line counts from the start of
// the document, into one that names the file and its line.
func yamlError(path string, start int, err error) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
		n, _ := strconv.Atoi(msg[m[2]:m[3]])
		return fmt.Errorf("%s:%d: malformed YAML: %s%s", path, start+n-1, msg[:m[0]], msg[m[1]:])
	}
	return fmt.Errorf("%s:%d: malformed YAML: %s", path, start, msg)
}
