// Command host is the polyop host: a generic controller-runtime manager that
// hands every reconcile of the kinds its sidecar declares to the sidecar, over
// gRPC.
//
// Usage:
//
//	host [--sidecar-address unix:///var/run/polyop/sidecar.sock] [--kubeconfig …] [flags]
//	host <command> [flags]
//
// Run host --help for the commands and every flag. The command line lives in
// internal/hostcmd, which `polyop host` runs too.
package main

import (
	"os"

	"github.com/polyop/polyop/internal/hostcmd"
)

func main() {
	os.Exit(hostcmd.Main(os.Args[1:]))
}
