package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// manifestFiles lists the manifests in dir (YAML or JSON), in the folders
// below it too when recursive is set, sorted. Kustomize's kustomization files
// are not manifests and are left out.
func manifestFiles(dir string, recursive bool) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		if strings.HasPrefix(strings.ToLower(d.Name()), "kustomization.") {
			return nil
		}
		files = append(files, path)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing manifests: %w", err)
	}
	slices.Sort(files)
	return files, nil
}

// readObjects decodes every object in files, which may hold several YAML
// documents each.
func readObjects(files []string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			obj := &unstructured.Unstructured{}
			err := decoder.Decode(&obj.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("reading %s: %w", file, err)
			}
			if len(obj.Object) == 0 {
				continue // an empty document
			}
			objs = append(objs, obj)
		}
		f.Close()
	}
	return objs, nil
}
