package hostcmd

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/polyop/polyop/internal/host"
)

// kubeconfigError says where the host looked for a kubeconfig, and what to
// do, when it found none it could load (err, from ctrl.GetConfig).
func kubeconfigError(err error) error {
	if f := flag.Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
		return fmt.Errorf("loading the kubeconfig %s (--kubeconfig): %w", f.Value.String(), err)
	}
	if env := os.Getenv("KUBECONFIG"); env != "" {
		return fmt.Errorf("loading the kubeconfig %s (KUBECONFIG): %w", env, err)
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return errors.New("no kubeconfig: --kubeconfig and KUBECONFIG are not set, there is no ~/.kube/config, " +
			"and the host does not run in a pod; pass --kubeconfig with the path of a kubeconfig file")
	}
	return fmt.Errorf("loading the in-cluster configuration: %w", err)
}

// addressInUseError names the flag that sets the address of a listener that
// could not bind because another process holds it; other errors are
// returned as they are.
func addressInUseError(err error, opts host.Options) error {
	var opErr *net.OpError
	if !errors.Is(err, syscall.EADDRINUSE) || !errors.As(err, &opErr) || opErr.Addr == nil {
		return err
	}
	flags := flagsOf(opErr.Addr, opts)
	if len(flags) == 0 || slices.ContainsFunc(flags, func(f string) bool { return strings.Contains(err.Error(), f) }) {
		// Nothing to add, or the error names its flag already.
		return err
	}
	names := strings.Join(flags, " and ")
	return fmt.Errorf("%w (the address of %s: stop what listens there, or give %s another address)", err, names, names)
}

// flagsOf returns the flags whose address is addr.
func flagsOf(addr net.Addr, opts host.Options) []string {
	if addr.Network() == "unix" {
		return []string{"--cluster-address"}
	}
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return nil
	}
	var flags []string
	for _, f := range []struct {
		name, address string
	}{
		{"--health-probe-bind-address", opts.HealthProbeBindAddress},
		{"--metrics-bind-address", opts.MetricsBindAddress},
		{"--pprof-bind-address", opts.PprofBindAddress},
		{"--webhook-port", ":" + strconv.Itoa(opts.Webhook.Port)},
		{"--cluster-address", strings.TrimPrefix(opts.ClusterAddress, "tcp://")},
	} {
		if _, p, err := net.SplitHostPort(f.address); err == nil && p == port {
			flags = append(flags, f.name)
		}
	}
	return flags
}
