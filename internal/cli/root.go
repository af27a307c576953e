package cli

import (
	"github.com/spf13/cobra"
)

// NewRootCommand returns the polyop command with every subcommand
// registered.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "polyop",
		Short: "Build, run and test polyop operators in Go, Python or TypeScript",
		Long: `polyop is the command-line tool for operators built on polyop: a generic
controller-runtime host that hands every reconcile and admission call of your
kinds, over gRPC, to a sidecar you write in any language.

Use it to try a sidecar's answers without a cluster (polyop render) and to see
what it builds and deploys (polyop version).`,
		Example: `  # Reconcile one object against your sidecar, with no cluster, and print the answer
  polyop render --object config/samples/widget.yaml -- ./bin/sidecar

  # Print polyop's version, protocol version and host image
  polyop version`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		NewInitCommand(),
		NewCreateCommand(),
		NewGenerateCommand(),
		NewRenderCommand(),
		NewVersionCommand(),
	)
	return root
}
