package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/polyop/polyop/internal/hostcmd"
	polyoprun "github.com/polyop/polyop/internal/run"
)

// NewHostCommand returns polyop host, which runs the host with its own
// command line (host --help lists it). It exits the process with the host's
// exit code.
func NewHostCommand() *cobra.Command {
	return &cobra.Command{
		Use:                polyoprun.HostCommandName + " [flags] | " + polyoprun.HostCommandName + " <describe|webhooks|rbac> [flags]",
		Short:              "Run the polyop host (as cmd/host does), for polyop run",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(hostcmd.Main(args))
		},
	}
}
