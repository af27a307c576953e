package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/version"
)

// NewCreateCommand returns polyop create, with api and webhook.
func NewCreateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Add a kind (api) or its admission and conversion (webhook) to the project",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newCreateAPICommand(), newCreateWebhookCommand())
	return cmd
}

func newCreateAPICommand() *cobra.Command {
	o := scaffold.APIOptions{Dir: "."}
	cmd := &cobra.Command{
		Use:   "api --group GROUP --version VERSION --kind KIND",
		Short: "Add a kind: its types, a reconciler, a sample and a test",
		Long: `Add a kind to the project in its language: the types (spec, and a status with
conditions and observedGeneration) from which polyop generate makes the CRD, a
reconciler registered with the sidecar, a sample in config/samples, and a unit
test on the SDK's harness, which needs no cluster.

Run make manifests (polyop generate) afterwards for the CRD and RBAC.`,
		Example: `  polyop create api --group ship --version v1 --kind Frigate
  # A cluster-scoped kind, with no controller
  polyop create api --group ship --version v1 --kind Harbor --namespaced=false --controller=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			warnVersionSkew(cmd, o.Dir)
			files, err := scaffold.CreateAPI(o)
			printWritten(cmd.OutOrStdout(), files)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "\nNext: make manifests (the CRD and RBAC), make test, then make run")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Group, "group", "", "The group's first label: ship makes the API group ship.<domain> (required).")
	f.StringVar(&o.Version, "version", "", "The API version, such as v1 or v1alpha1 (required).")
	f.StringVar(&o.Kind, "kind", "", "The kind, in CamelCase (required).")
	f.StringVar(&o.Plural, "plural", "", "The resource name (default: the kind in lower case, pluralised).")
	f.BoolVar(&o.Namespaced, "namespaced", true, "Whether the kind is namespaced (false: cluster-scoped).")
	f.BoolVar(&o.Resource, "resource", true, "Write the kind's types and CRD.")
	f.BoolVar(&o.Controller, "controller", true, "Write a reconciler of the kind.")
	f.BoolVar(&o.Force, "force", false, "Overwrite files that exist.")
	for _, name := range []string{"group", "version", "kind"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func newCreateWebhookCommand() *cobra.Command {
	o := scaffold.WebhookOptions{Dir: "."}
	cmd := &cobra.Command{
		Use:   "webhook --group GROUP --version VERSION --kind KIND [--defaulting] [--programmatic-validation] [--conversion]",
		Short: "Add defaulting, validation or conversion to a kind of the project",
		Long: `Add admission to a kind of the project: a defaulting handler (mutating
webhook), a validation handler (validating webhook) or conversion between the
kind's versions, registered with the sidecar, and a unit test. The host serves
the webhooks; polyop run wires them to the local control plane, and make
manifests writes their configurations for a deployment.`,
		Example: `  polyop create webhook --group ship --version v1 --kind Frigate --defaulting --programmatic-validation
  polyop create webhook --group ship --version v1 --kind Frigate --conversion`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			warnVersionSkew(cmd, o.Dir)
			files, err := scaffold.CreateWebhook(o)
			printWritten(cmd.OutOrStdout(), files)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "\nNext: make manifests (the webhook configurations), make test, then make run")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Group, "group", "", "The kind's group, as given to create api (required).")
	f.StringVar(&o.Version, "version", "", "The kind's version (required).")
	f.StringVar(&o.Kind, "kind", "", "The kind (required).")
	f.BoolVar(&o.Defaulting, "defaulting", false, "Add a defaulting (mutating admission) handler.")
	f.BoolVar(&o.Validation, "programmatic-validation", false, "Add a validation (validating admission) handler.")
	f.BoolVar(&o.Conversion, "conversion", false, "Add conversion between the kind's versions.")
	f.BoolVar(&o.Force, "force", false, "Overwrite files that exist.")
	for _, name := range []string{"group", "version", "kind"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// warnVersionSkew warns, on standard error, when the project at dir was made
// by another version of polyop (see scaffold.Project.VersionSkew). A project
// that does not load is left to the command, which says why.
func warnVersionSkew(cmd *cobra.Command, dir string) {
	if p, _, err := scaffold.LoadProject(dir); err == nil {
		if skew := p.VersionSkew(version.Version); skew != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s\n", skew)
		}
	}
}
