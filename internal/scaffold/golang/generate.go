package golang

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/polyop/polyop/internal/scaffold"
)

// ControllerGenVersion is the controller-gen polyop generate installs when it
// finds none: the version this repository pins (CONTROLLER_GEN_VERSION in
// its Makefile; a test checks they agree).
const ControllerGenVersion = "v0.23.0"

// controllerGenPackage is controller-gen's main package.
const controllerGenPackage = "sigs.k8s.io/controller-tools/cmd/controller-gen"

// GenerateCRDs runs controller-gen over api/ as kubebuilder's make generate
// and make manifests do: the deep copy functions (object) and the CRDs
// (crd), written into scaffold.CRDDir as <group>_<plural>.yaml.
func (Scaffolder) GenerateCRDs(ctx context.Context, p *scaffold.Project, root string, log io.Writer) error {
	if !hasAPI(p) {
		fmt.Fprintln(log, "No kinds with types (polyop create api adds them): no CRDs to generate.")
		return nil
	}
	// controller-gen loads the packages, which takes the module's
	// dependencies: a project not set up yet (make runs its setup first)
	// gets them now.
	if _, err := os.Stat(filepath.Join(root, "go.sum")); errors.Is(err, os.ErrNotExist) {
		if err := scaffold.RunCommand(ctx, root, log, nil, "go", "mod", "tidy"); err != nil {
			return fmt.Errorf("downloading the module's dependencies: %w", err)
		}
	}
	gen, err := findControllerGen(ctx, root, log)
	if err != nil {
		return err
	}
	for _, args := range [][]string{
		{"object:headerFile=hack/boilerplate.go.txt", "paths=./api/..."},
		{"crd", "paths=./api/...", "output:crd:artifacts:config=" + scaffold.CRDDir},
	} {
		if err := scaffold.RunCommand(ctx, root, log, nil, gen, args...); err != nil {
			return err
		}
	}
	for _, r := range p.Resources {
		if !r.API {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(r.CRDFile()))); err != nil {
			return fmt.Errorf("controller-gen wrote no %s for %s %s: check the markers on api/%s/%s_types.go (+kubebuilder:object:root=true, +kubebuilder:resource:path=%s) and +groupName=%s",
				r.CRDFile(), r.APIVersion(), r.Kind, r.Version, strings.ToLower(r.Kind), r.Plural, r.APIGroup())
		}
	}
	return nil
}

func hasAPI(p *scaffold.Project) bool {
	for _, r := range p.Resources {
		if r.API {
			return true
		}
	}
	return false
}

// findControllerGen returns the controller-gen to run: $CONTROLLER_GEN, else
// the project's bin/controller-gen, else controller-gen on the PATH; with
// none, it installs ControllerGenVersion into the project's bin/ with go
// install.
func findControllerGen(ctx context.Context, root string, log io.Writer) (string, error) {
	if gen := os.Getenv("CONTROLLER_GEN"); gen != "" {
		if _, err := exec.LookPath(gen); err != nil {
			return "", fmt.Errorf("CONTROLLER_GEN=%s: %w (unset it to let polyop install controller-gen into bin/)", gen, err)
		}
		return gen, nil
	}
	local := filepath.Join(root, "bin", "controller-gen")
	if _, err := os.Stat(local); err == nil {
		return local, nil
	}
	if gen, err := exec.LookPath("controller-gen"); err == nil {
		return gen, nil
	}
	bin := filepath.Join(root, "bin")
	fmt.Fprintf(log, "controller-gen not found ($CONTROLLER_GEN, bin/controller-gen, PATH): installing %s@%s into %s\n", controllerGenPackage, ControllerGenVersion, bin)
	env := append(os.Environ(), "GOBIN="+bin)
	if err := scaffold.RunCommand(ctx, root, log, env, "go", "install", controllerGenPackage+"@"+ControllerGenVersion); err != nil {
		return "", fmt.Errorf("installing controller-gen: %w (or install it yourself and set CONTROLLER_GEN)", err)
	}
	return local, nil
}
