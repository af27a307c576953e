package controlplane

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

//go:generate sh -c "cp ../../hack/tools/envtest/go.mod module/go.mod.txt && cp ../../hack/tools/envtest/go.sum module/go.sum.txt && cp ../../hack/tools/envtest/etcd/main.go module/etcd/main.go.txt"

// module is the copy of hack/tools/envtest. Its files end in .txt: a go.mod
// would make the folder a module of its own, which go:embed cannot reach, and
// a .go file would be compiled into this package.
//
//go:embed module
var module embed.FS

// SourceFiles are the files of the tools module, by their path in it.
var SourceFiles = []string{"go.mod", "go.sum", "etcd/main.go"}

// Binaries are the programs a control plane needs, as envtest names them in
// KUBEBUILDER_ASSETS.
var Binaries = []string{"kube-apiserver", "etcd", "kubectl"}

// packages are the main packages of Binaries, in the tools module.
var packages = map[string]string{
	"kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
	"etcd":           "./etcd",
	"kubectl":        "k8s.io/kubernetes/cmd/kubectl",
}

// EmbeddedSource returns the embedded copy of the tools module's file path
// (one of SourceFiles).
func EmbeddedSource(path string) ([]byte, error) {
	return fs.ReadFile(module, "module/"+path+".txt")
}

// writeEmbeddedSource writes the embedded tools module into dir.
func writeEmbeddedSource(dir string) error {
	for _, path := range SourceFiles {
		data, err := EmbeddedSource(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Version is the Kubernetes version the embedded tools module builds, such
// as 1.37.2: the version of k8s.io/kubernetes its go.mod requires.
func Version() string {
	data, err := EmbeddedSource("go.mod")
	if err != nil {
		panic(fmt.Sprintf("the embedded tools module has no go.mod: %v", err))
	}
	v, err := moduleVersion(data)
	if err != nil {
		panic(err)
	}
	return v
}

// moduleVersion returns the version of k8s.io/kubernetes, without its "v",
// that a go.mod requires.
func moduleVersion(goMod []byte) (string, error) {
	s := bufio.NewScanner(bytes.NewReader(goMod))
	for s.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(s.Text()), "require "))
		if len(fields) >= 2 && fields[0] == "k8s.io/kubernetes" {
			return strings.TrimPrefix(fields[1], "v"), nil
		}
	}
	return "", fmt.Errorf("the tools module's go.mod requires no k8s.io/kubernetes")
}

// modulePath returns the module path a go.mod declares; "" when it declares
// none.
func modulePath(goMod []byte) string {
	s := bufio.NewScanner(bytes.NewReader(goMod))
	for s.Scan() {
		if path, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(path), `"`)
		}
	}
	return ""
}

// SourceVersion returns the Kubernetes version of the tools module in dir.
func SourceVersion(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	return moduleVersion(data)
}
