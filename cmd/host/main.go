// Command host is the polyop host: a generic controller-runtime manager that
// hands every reconcile of the kinds its sidecar declares to the sidecar, over
// gRPC.
//
// Usage:
//
//	host [--sidecar-address unix:///var/run/polyop/sidecar.sock] [--kubeconfig …] [flags]
//	host <command> [flags]
//
// Run host --help for every flag, and host help for the commands.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/polyop/polyop/internal/host"
)

// command is a subcommand of the host: it prints something derived from the
// sidecar's description instead of running the controllers.
type command struct {
	summary string
	run     func(args []string) error
}

// commands are the host's subcommands, by name.
var commands = map[string]command{
	"describe": {summary: "print the sidecar's description as JSON", run: runDescribe},
	"webhooks": {summary: "print the webhook configurations and CRD conversion stanzas as YAML", run: runWebhooks},
	"rbac":     {summary: "print the RBAC the host needs for the sidecar's description as YAML", run: runRBAC},
}

func main() {
	if len(os.Args) > 1 {
		if name := os.Args[1]; name == "help" {
			usage()
			return
		} else if cmd, ok := commands[name]; ok {
			if err := cmd.run(os.Args[2:]); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return
				}
				fail(err)
			}
			return
		}
	}

	opts := host.NewOptions()
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	version := flag.Bool("version", false, "Print the host's version and exit.")
	flag.Parse()
	if *version {
		fmt.Println(host.Version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fail(fmt.Errorf("loading a kubeconfig: %w", err))
	}
	if err := host.Run(ctrl.SetupSignalHandler(), cfg, opts); err != nil {
		fail(err)
	}
}

func usage() {
	fmt.Println("Usage: host [flags]            run the host (host --help lists the flags)")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Printf("       host %-14s %s (host %s --help)\n", name, commands[name].summary, name)
	}
}

// fail reports why the host stops, once, plainly, and exits non-zero.
func fail(err error) {
	fmt.Fprintf(os.Stderr, "polyop host: %v\n", err)
	os.Exit(1)
}
