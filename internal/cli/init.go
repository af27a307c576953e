package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/version"
)

// NewInitCommand returns polyop init.
func NewInitCommand() *cobra.Command {
	o := scaffold.InitOptions{Dir: ".", Version: version.Version}
	var language string
	cmd := &cobra.Command{
		Use:   "init --language go|python|typescript --domain DOMAIN",
		Short: "Start a new polyop project in the current folder",
		Long: `Start a new polyop project in the current (empty) folder: the sidecar's entry
point on polyop's SDK for the language, a Makefile with the targets run, test,
manifests, docker-build, deploy, undeploy, install and uninstall, a Dockerfile,
config/ (kustomize) for the pod of the host and the sidecar, a README, the
PROJECT file that later polyop commands read, and the language's test setup
with one passing test.

config/default deploys the project with the host pinned to the image of this
polyop's version, the host making its webhook certificate;
config/default-certmanager takes it from cert-manager. Both build on
config/polyop, polyop's own kustomize base, copied.

Then add kinds with polyop create api, admission with polyop create webhook.`,
		Example: `  mkdir widgets && cd widgets
  polyop init --language python --domain example.com
  polyop create api --group apps --version v1 --kind Widget

  # A Go project, with the module path of its repository
  polyop init --language go --domain example.com --repo github.com/acme/widgets

  # Take the SDK from a local checkout of polyop instead of its published version
  polyop init --language typescript --domain example.com --sdk-source ~/src/polyop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := scaffold.ParseLanguage(language)
			if err != nil {
				return err
			}
			o.Language = l
			files, err := scaffold.Init(o)
			printWritten(cmd.OutOrStdout(), files)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nNext: polyop create api --group <group> --version v1 --kind <Kind>\n")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&language, "language", "l", "", "The sidecar's language: "+joinLanguages()+" (required).")
	f.StringVar(&o.Domain, "domain", "", "The domain of the project's API groups, such as example.com (required).")
	f.StringVar(&o.Name, "project-name", "", "The project's name (default: the folder's name).")
	f.StringVar(&o.Repo, "repo", "", "Go: the module path (default: <domain>/<project name>).")
	f.StringVar(&o.Package, "package", "", "Python: the package to import; TypeScript: the npm package name (default: from the project name).")
	f.StringVar(&o.SDKSource, "sdk-source", "", "A local checkout of polyop's repository to take the SDK from instead of its published version.")
	f.BoolVar(&o.Force, "force", false, "Write into a folder that is not empty, overwriting files.")
	_ = cmd.MarkFlagRequired("language")
	_ = cmd.MarkFlagRequired("domain")
	return cmd
}

func joinLanguages() string {
	names := make([]string, len(scaffold.Languages))
	for i, l := range scaffold.Languages {
		names[i] = string(l)
	}
	return strings.Join(names, ", ")
}

// printWritten lists the files a scaffolding command wrote.
func printWritten(out io.Writer, files []string) {
	for _, f := range files {
		fmt.Fprintf(out, "wrote %s\n", f)
	}
}
