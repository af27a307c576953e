package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/sidecarprocess"
	"github.com/polyop/polyop/internal/version"
)

// GenerateOptions are polyop generate's.
type GenerateOptions struct {
	// Dir is a folder of the project: its PROJECT file is there or in a
	// folder above it. Defaults to ".".
	Dir string
	// StartTimeout bounds the wait for the sidecar to serve after it
	// started. Defaults to 2m, for a runtime that starts slowly.
	StartTimeout time.Duration
	// SidecarLogs copies the build's and the sidecar's output to the error
	// output as they come. Defaults to false: only an error shows them.
	SidecarLogs bool
}

// NewGenerateCommand returns polyop generate.
func NewGenerateCommand() *cobra.Command {
	o := GenerateOptions{Dir: ".", StartTimeout: 2 * time.Minute}
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Regenerate the CRDs, RBAC and webhook configurations from the project's code",
		Long: `Regenerate what derives from the project's code, as make manifests does.

First the CRDs, from the types (Go: controller-gen markers, as kubebuilder;
Python: polyop.crd models; TypeScript: @polyop/sidecar/crd kinds):

  config/crd/bases/                   one CRD per kind
  config/crd/kustomization.yaml       lists them (make install applies it)

Then it builds the sidecar (the PROJECT file's sidecar.build, in the
project's root), starts it (sidecar.command, with --address appended) and
asks it to describe itself, as the host does (no cluster needed), to write:

  config/rbac/role.yaml               the host's RBAC for the kinds the sidecar
                                      reconciles, owns and watches, with the
                                      leader election Role and the metrics
                                      endpoint's rules
  config/webhook/manifests.yaml       the configurations of the admission
                                      webhooks it declares (no objects if none)
  config/webhook/conversion.yaml      the conversion stanzas of the CRDs it
                                      converts (only when it converts kinds)
  config/webhook/kustomization.yaml   the component config/default and
                                      config/default-certmanager list

The project's kinds are resolved with the plural and scope of the PROJECT
file, other kinds guessed from the kind (lower case, plural). Every file
written is printed. A build that fails, or a sidecar that does not serve, is
an error showing the end of the command's output.`,
		Example: `  polyop generate
  # Show the sidecar's output while it builds and starts
  polyop generate --sidecar-logs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Generate(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Dir, "project-dir", o.Dir, "A folder of the project: its PROJECT file is there or in a folder above it.")
	f.DurationVar(&o.StartTimeout, "sidecar-start-timeout", o.StartTimeout, "How long to wait for the sidecar to serve once started.")
	f.BoolVar(&o.SidecarLogs, "sidecar-logs", false, "Copy the sidecar's build and run output to stderr (default: shown only when it fails).")
	return cmd
}

// Generate regenerates the project's CRDs, then its RBAC and webhook
// manifests from its sidecar's description, printing each file written to
// out and what it runs to errOut.
func Generate(ctx context.Context, o GenerateOptions, out, errOut io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	p, root, err := scaffold.LoadProject(o.Dir)
	if err != nil {
		return err
	}
	if skew := p.VersionSkew(version.Version); skew != "" {
		fmt.Fprintf(errOut, "Warning: %s\n", skew)
	}
	if err := scaffold.Generate(ctx, root, errOut); err != nil {
		return err
	}
	crds, err := scaffold.WriteCRDKustomization(root)
	if err != nil {
		return err
	}
	printWritten(out, []string{crds})

	desc, err := sidecarprocess.Describe(ctx, p, root, o.StartTimeout, o.SidecarLogs, errOut)
	if err != nil {
		return err
	}
	files, err := scaffold.WriteDescribed(root, p, desc)
	printWritten(out, files)
	return err
}
