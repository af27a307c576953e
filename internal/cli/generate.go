package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/host"
	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/sidecar"
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
	if err := scaffold.Generate(ctx, root, errOut); err != nil {
		return err
	}
	crds, err := scaffold.WriteCRDKustomization(root)
	if err != nil {
		return err
	}
	printWritten(out, []string{crds})

	desc, err := describeProject(ctx, p, root, o, errOut)
	if err != nil {
		return err
	}
	files, err := scaffold.WriteDescribed(root, p, desc)
	printWritten(out, files)
	return err
}

// describeProject builds the project's sidecar, starts it and returns its
// description.
func describeProject(ctx context.Context, p *scaffold.Project, root string, o GenerateOptions, errOut io.Writer) (*description.Description, error) {
	var logs io.Writer
	if o.SidecarLogs {
		logs = errOut
	}
	if build := p.Sidecar.Build; len(build) > 0 {
		fmt.Fprintf(errOut, "building the sidecar: %s\n", strings.Join(build, " "))
		output := &tailBuffer{limit: 16 << 10}
		var w io.Writer = output
		if logs != nil {
			w = io.MultiWriter(output, logs)
		}
		if err := buildSidecar(ctx, p, root, w, w); err != nil {
			return nil, fmt.Errorf("%w%s", err, outputNote(output.tail(20)))
		}
	}
	fmt.Fprintf(errOut, "asking the sidecar to describe itself: %s\n", strings.Join(p.Sidecar.Command, " "))
	proc, err := StartSidecarIn(root, p.Sidecar.Command, logs, "")
	if err != nil {
		return nil, err
	}
	defer proc.Stop()
	sc, err := sidecar.New(sidecar.Options{Address: proc.Address})
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	command := strings.Join(p.Sidecar.Command, " ")
	if err := waitServing(ctx, sc, proc.Done(), o.StartTimeout); err != nil {
		select {
		case <-proc.Done():
			return nil, fmt.Errorf("the sidecar exited before it served (the PROJECT file's sidecar.command, in %s): %w", root, proc.ExitedError())
		default:
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the sidecar command %q (the PROJECT file's sidecar.command, in %s) did not serve on %s: %w (it must serve on the address given with %s)%s",
			command, root, proc.Address, err, AddressFlag, proc.outputNote())
	}
	desc, err := sc.Describe(ctx, host.Version)
	if err != nil {
		return nil, fmt.Errorf("the sidecar command %q did not describe itself: %w%s", command, err, proc.outputNote())
	}
	return desc, nil
}

// outputNote is the end of a command's output, tail, for an error message.
func outputNote(tail string) string {
	if tail == "" {
		return " (it printed nothing)"
	}
	return "; the end of its output:\n" + tail
}
