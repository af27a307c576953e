package hostcmd

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
	"github.com/polyop/polyop/internal/version"
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
	"ring":     {summary: "print a sharded host's ring: its live members, their shares and objects", run: runRing},
}

// Main runs the host with args, the command line after the program's name,
// and returns the process's exit code: 0 once the host stopped on a signal
// or a command printed what it prints, 1 when it failed, 2 for a command
// line it does not understand. The host's flags are registered on
// flag.CommandLine (next to controller-runtime's --kubeconfig), so Main is
// called once per process.
func Main(args []string) int {
	if len(args) > 0 {
		name := args[0]
		if cmd, ok := commands[name]; ok {
			if err := cmd.run(args[1:]); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return 0
				}
				return fail(err)
			}
			return 0
		}
		switch {
		case name == "help":
			usage(os.Stdout)
			return 0
		case !strings.HasPrefix(name, "-"):
			return usageError(fmt.Errorf("unknown command %q: the commands are %s (run host --help for them and the flags)",
				name, strings.Join(commandNames(), ", ")))
		}
	}

	fs := flag.CommandLine
	opts := host.NewOptions()
	opts.BindFlags(fs)
	// An error the host logs is expected (a sidecar's answer refused, an
	// object that failed to reconcile, retried): it says what happened, and
	// a stack trace of the host would say nothing more. --zap-stacktrace-level
	// brings them back.
	zapOpts := zap.Options{StacktraceLevel: zapcore.PanicLevel}
	zapOpts.BindFlags(fs)
	printVersion := fs.Bool("version", false, "Print the host's version and exit.")
	fs.Usage = func() {
		usage(fs.Output())
		fmt.Fprintln(fs.Output(), "\nFlags of host (running the controllers):")
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output(), "\nTracing is off unless the OpenTelemetry variables turn it on: OTEL_EXPORTER_OTLP_ENDPOINT (or\n"+
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp), with OTEL_EXPORTER_OTLP_PROTOCOL (grpc or\n"+
			"http/protobuf), OTEL_SERVICE_NAME (default polyop-host), OTEL_TRACES_SAMPLER; see docs/observability.md.")
	}
	// flag.CommandLine exits on a bad flag (2) and on --help (0), as a
	// program's own flags do.
	_ = fs.Parse(args)
	if *printVersion {
		fmt.Println(version.Version)
		return 0
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Errorf("unexpected argument %q: a command comes first (host <command> [flags]), and the host takes flags only", fs.Arg(0)))
	}

	// Loaded before the logger is set: controller-runtime logs, with a stack
	// trace, each place it did not find a configuration, which
	// kubeconfigError says once.
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fail(kubeconfigError(err))
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if err := host.Run(ctrl.SetupSignalHandler(), cfg, opts); err != nil {
		return fail(addressInUseError(err, opts))
	}
	return 0
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

// fail reports why the host stops, once, plainly: the exit code is 1.
func fail(err error) int {
	fmt.Fprintf(os.Stderr, "polyop host: %v\n", err)
	return 1
}

// usageError reports a command line the host does not understand: the exit
// code is 2, as the flag package's.
func usageError(err error) int {
	fmt.Fprintf(os.Stderr, "polyop host: %v\n", err)
	return 2
}
