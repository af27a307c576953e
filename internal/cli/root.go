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

Use it to start a project (polyop init, create api, create webhook), to
generate its CRDs from its types (polyop generate), to run it on your machine
against a local control plane or your cluster, webhooks included (polyop run),
to try a sidecar's answers without a cluster (polyop render) and to see what it
builds and deploys (polyop version).`,
		Example: `  # Start a project, add a kind with its webhooks, generate its manifests
  polyop init --language python --domain example.com
  polyop create api --group ship --version v1 --kind Frigate
  polyop create webhook --group ship --version v1 --kind Frigate --defaulting --programmatic-validation
  polyop generate

  # Run the project in the working directory until Ctrl-C (a local control plane when no cluster is configured)
  polyop run

  # Reconcile one object against your sidecar, with no cluster, and print the answer
  polyop render --object config/samples/widget.yaml -- ./bin/sidecar

  # Print the versions of polyop, its host, its SDKs, its protocol and its local control plane
  polyop version`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		NewInitCommand(),
		NewCreateCommand(),
		NewGenerateCommand(),
		NewRunCommand(),
		NewRenderCommand(),
		NewVersionCommand(),
		NewHostCommand(),
		NewEnvtestCommand(),
	)
	return root
}
