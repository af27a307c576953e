package cli

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/polyop/polyop/internal/controlplane"
)

// NewEnvtestCommand returns the hidden polyop envtest, which builds the
// control-plane binaries from source as polyop run does when it needs them:
// this repository's `make envtest` runs it on hack/tools/envtest.
func NewEnvtestCommand() *cobra.Command {
	var dir, source, version string
	var only []string
	var rebuild bool
	cmd := &cobra.Command{
		Use:    "envtest --dir DIR [--source hack/tools/envtest] [--version X.Y.Z] [--only NAME] [--rebuild]",
		Short:  "Build kube-apiserver, etcd and kubectl from source into DIR (for KUBEBUILDER_ASSETS)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			printf := func(format string, args ...any) {
				fmt.Fprintf(cmd.OutOrStdout(), "[envtest] "+format+"\n", args...)
			}
			if version != "" {
				built := controlplane.Version()
				if source != "" {
					v, err := controlplane.SourceVersion(source)
					if err != nil {
						return err
					}
					built = v
				}
				if built != version {
					return fmt.Errorf("asked for Kubernetes %s, but the tools module builds %s: make them agree (K8S_VERSION and k8s.io/kubernetes in hack/tools/envtest/go.mod)", version, built)
				}
			}
			if !rebuild {
				if only = missingOf(dir, only); len(only) == 0 {
					printf("%s holds what was asked for already", dir)
					return nil
				}
			}
			return controlplane.Builder{Source: source, Binaries: only, Printf: printf}.Build(cmd.Context(), dir)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "The folder to build the binaries into (required).")
	cmd.Flags().StringVar(&source, "source", "", "A folder holding the tools module to build (default: the copy embedded in polyop).")
	cmd.Flags().StringVar(&version, "version", "", "Fail unless the tools module builds this Kubernetes version.")
	cmd.Flags().StringSliceVar(&only, "only", nil, "Build only these binaries (default: kube-apiserver, etcd and kubectl).")
	cmd.Flags().BoolVar(&rebuild, "rebuild", false, "Build even what the folder holds already.")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// missingOf returns those of names (default: every control-plane binary) that
// dir does not hold.
func missingOf(dir string, names []string) []string {
	if len(names) == 0 {
		names = controlplane.Binaries
	}
	var out []string
	for _, name := range controlplane.Missing(dir) {
		if slices.Contains(names, name) {
			out = append(out, name)
		}
	}
	return out
}
