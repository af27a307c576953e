package run

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/polyop/polyop/internal/render"
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

// readManifests decodes every object in files (see render.ReadObjects).
func readManifests(files []string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, file := range files {
		fileObjs, err := render.ReadObjects(file)
		if err != nil {
			return nil, err
		}
		objs = append(objs, fileObjs...)
	}
	return objs, nil
}
