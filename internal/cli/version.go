package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/host"
	"github.com/polyop/polyop/internal/scaffold"
)

// HostImageRepository is the image repository of the host that polyop
// deploys: the one `make docker-build` tags (its IMG).
const HostImageRepository = scaffold.HostImageRepository

// HostImage is the host image polyop deploys: HostImageRepository at the tag
// of polyop's own version, so that a project runs the host it was made
// with (its config/default pins it).
func HostImage() string { return scaffold.HostImage(host.Version) }

// VersionInfo is what polyop version prints.
type VersionInfo struct {
	// Version is polyop's version, which is the host's
	// (github.com/polyop/polyop/internal/host.Version, stamped with -ldflags).
	Version string `json:"version"`
	// Protocol is the version of the sidecar protocol polyop and its host
	// speak, as the proto names it.
	Protocol string `json:"protocol"`
	// HostImage is the host image polyop deploys.
	HostImage string `json:"hostImage"`
	// GoVersion is the Go release polyop was built with.
	GoVersion string `json:"goVersion"`
	// Platform is the OS and architecture polyop runs on, as GOOS/GOARCH.
	Platform string `json:"platform"`
}

// CurrentVersion is the VersionInfo of this binary.
func CurrentVersion() VersionInfo {
	return VersionInfo{
		Version:   host.Version,
		Protocol:  protocolName(),
		HostImage: HostImage(),
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// protocolName is the protocol version as users write it: v1alpha1 for
// PROTOCOL_VERSION_V1ALPHA1.
func protocolName() string {
	return strings.ToLower(strings.TrimPrefix(description.ProtocolVersion.String(), "PROTOCOL_VERSION_"))
}

// NewVersionCommand returns polyop version.
func NewVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print polyop's version, protocol version and host image",
		Long: `Print the version of polyop, the version of the sidecar protocol it speaks,
the host image it deploys, and the Go release and platform it was built for.`,
		Example: `  polyop version
  polyop version --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printVersion(cmd, CurrentVersion(), output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text or json.")
	return cmd
}

func printVersion(cmd *cobra.Command, v VersionInfo, output string) error {
	out := cmd.OutOrStdout()
	switch output {
	case "text", "":
		_, err := fmt.Fprintf(out, "polyop:     %s\nprotocol:   %s\nhost image: %s\ngo:         %s\nplatform:   %s\n",
			v.Version, v.Protocol, v.HostImage, v.GoVersion, v.Platform)
		return err
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return fmt.Errorf("unknown --output %q: use text or json", output)
}
