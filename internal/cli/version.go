package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/polyop/polyop/internal/controlplane"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/version"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// HostImageRepository is the image repository of the host that polyop
// deploys: the one `make docker-build` tags (its IMG).
const HostImageRepository = scaffold.HostImageRepository

// HostImage is the host image polyop deploys: HostImageRepository at the tag
// of polyop's own version, so that a project runs the host it was made
// with (its config/default pins it).
func HostImage() string { return scaffold.HostImage(version.Version) }

// VersionInfo is what polyop version prints.
type VersionInfo struct {
	// Version is polyop's version: the VERSION file's
	// (github.com/polyop/polyop/internal/version.Version).
	Version string `json:"version"`
	// Host is the version of the host inside polyop, which polyop run
	// runs: always Version, since the host is built into the command.
	Host string `json:"host"`
	// SDKs are the versions of the SDKs the projects polyop makes depend
	// on, by language: the Go module github.com/polyop/polyop/sdk/go, the
	// Python package polyop and the npm package @polyop/sidecar.
	SDKs SDKVersions `json:"sdks"`
	// Protocol is the version of the sidecar protocol polyop and its host
	// speak, as the proto names it.
	Protocol string `json:"protocol"`
	// Kubernetes is the Kubernetes version of the local control plane
	// polyop run starts when no cluster is configured.
	Kubernetes string `json:"kubernetes"`
	// HostImage is the host image polyop deploys.
	HostImage string `json:"hostImage"`
	// GoVersion is the Go release polyop was built with.
	GoVersion string `json:"goVersion"`
	// Platform is the OS and architecture polyop runs on, as GOOS/GOARCH.
	Platform string `json:"platform"`
}

// SDKVersions are the SDK versions of VersionInfo, by language.
type SDKVersions struct {
	// Go is the version of github.com/polyop/polyop/sdk/go built into
	// polyop, which `polyop init --language go` requires.
	Go string `json:"go"`
	// Python is the version of the Python package polyop that
	// `polyop init --language python` pins.
	Python string `json:"python"`
	// TypeScript is the version of the npm package @polyop/sidecar that
	// `polyop init --language typescript` pins.
	TypeScript string `json:"typescript"`
}

// CurrentVersion is the VersionInfo of this binary.
func CurrentVersion() VersionInfo {
	return VersionInfo{
		Version: version.Version,
		Host:    version.Version,
		// The scaffold pins the Python and TypeScript SDKs at polyop's
		// version; the Go SDK is the one polyop is built with.
		SDKs:       SDKVersions{Go: sidecar.SDKVersion, Python: version.Version, TypeScript: version.Version},
		Protocol:   protocolName(),
		Kubernetes: controlplane.Version(),
		HostImage:  HostImage(),
		GoVersion:  runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
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
		Short: "Print the versions of polyop, its host, SDKs, protocol and local control plane",
		Long: `Print the version of polyop and of the host inside it, the versions of the
SDKs the projects it makes depend on, the version of the sidecar protocol it
speaks, the Kubernetes version of the local control plane polyop run starts,
the host image it deploys, and the Go release and platform it was built for.
One version covers polyop, its host, its host image and its three SDKs: a
project made by one version and run by another says so (see PROJECT's
polyopVersion).`,
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
		_, err := fmt.Fprintf(out, "polyop:     %s\nhost:       %s\nsdk/go:     %s\nsdk/python: %s\nsdk/ts:     %s\nprotocol:   %s\nkubernetes: %s\nhost image: %s\ngo:         %s\nplatform:   %s\n",
			v.Version, v.Host, v.SDKs.Go, v.SDKs.Python, v.SDKs.TypeScript, v.Protocol, v.Kubernetes, v.HostImage, v.GoVersion, v.Platform)
		return err
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return fmt.Errorf("unknown --output %q: use text or json", output)
}
