package cli

import (
	"github.com/spf13/cobra"

	"github.com/polyop/polyop/internal/scaffold"
)

// NewGenerateCommand returns polyop generate.
func NewGenerateCommand() *cobra.Command {
	dir := "."
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Regenerate the CRDs, RBAC and webhook configurations from the project's code",
		Long: `Regenerate what derives from the project's code, as make manifests does:
the CRDs in config/crd/bases from the types (Go: controller-gen markers, as
kubebuilder; Python: polyop.crd models; TypeScript: @polyop/sidecar/crd kinds),
then, from the description the sidecar gives of itself, the host's RBAC
(config/rbac/role.yaml) and the webhook configurations
(config/webhook/manifests.yaml).`,
		Example: `  polyop generate`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return scaffold.Generate(cmd.Context(), dir, cmd.ErrOrStderr())
		},
	}
	return cmd
}
