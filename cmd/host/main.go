// Command host is the polyop host: a generic controller-runtime manager that
// hands every reconcile of the kinds its sidecar declares to the sidecar, over
// gRPC.
//
// Usage:
//
//	host [--sidecar-address unix:///var/run/polyop/sidecar.sock] [--kubeconfig …] [flags]
//	host <command> [flags]
//
// Run host --help for the commands and every flag.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"go.uber.org/zap/zapcore"
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
		name := os.Args[1]
		if cmd, ok := commands[name]; ok {
			if err := cmd.run(os.Args[2:]); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return
				}
				fail(err)
			}
			return
		}
		switch {
		case name == "help":
			usage(os.Stdout)
			return
		case !strings.HasPrefix(name, "-"):
			usageError(fmt.Errorf("unknown command %q: the commands are %s (run host --help for them and the flags)",
				name, strings.Join(commandNames(), ", ")))
		}
	}

	opts := host.NewOptions()
	opts.BindFlags(flag.CommandLine)
	// An error the host logs is expected (a sidecar's answer refused, an
	// object that failed to reconcile, retried): it says what happened, and
	// a stack trace of the host would say nothing more. --zap-stacktrace-level
	// brings them back.
	zapOpts := zap.Options{StacktraceLevel: zapcore.PanicLevel}
	zapOpts.BindFlags(flag.CommandLine)
	version := flag.Bool("version", false, "Print the host's version and exit.")
	flag.CommandLine.Usage = func() {
		usage(flag.CommandLine.Output())
		fmt.Fprintln(flag.CommandLine.Output(), "\nFlags of host (running the controllers):")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *version {
		fmt.Println(host.Version)
		return
	}
	if flag.NArg() > 0 {
		usageError(fmt.Errorf("unexpected argument %q: a command comes first (host <command> [flags]), and the host takes flags only", flag.Arg(0)))
	}

	// Loaded before the logger is set: controller-runtime logs, with a stack
	// trace, each place it did not find a configuration, which
	// kubeconfigError says once.
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fail(kubeconfigError(err))
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if err := host.Run(ctrl.SetupSignalHandler(), cfg, opts); err != nil {
		fail(addressInUseError(err, opts))
	}
}

// commandNames are the names of the subcommands, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func usage(out io.Writer) {
	fmt.Fprintln(out, "Usage: host [flags]            run the host (the flags follow)")
	for _, name := range commandNames() {
		fmt.Fprintf(out, "       host %-14s %s (host %s --help)\n", name, commands[name].summary, name)
	}
	fmt.Fprintf(out, "       host %-14s print this\n", "help")
}

// fail reports why the host stops, once, plainly, and exits non-zero.
func fail(err error) {
	fmt.Fprintf(os.Stderr, "polyop host: %v\n", err)
	os.Exit(1)
}

// usageError reports a command line the host does not understand, and exits
// with 2, as the flag package does.
func usageError(err error) {
	fmt.Fprintf(os.Stderr, "polyop host: %v\n", err)
	os.Exit(2)
}
