// Command probe is a container's exec probe for a polyop sidecar: it asks the
// gRPC health service at an address whether it is serving, and exits 0 when it
// answers SERVING and 1 otherwise, saying why.
//
// Kubernetes' own grpc probe dials the pod's IP, so it cannot reach a sidecar
// that serves on a unix socket in the pod's shared volume; an exec probe
// running inside the sidecar's container can. The probe is a binary of its own
// rather than a subcommand of the host because the kubelet runs it every few
// seconds inside the sidecar's container, counted against that container's
// memory limit: it links gRPC and nothing else (a tenth of the host's size and
// memory).
//
// The host image ships it at /probe. A sidecar image need not contain it: the
// deployment's init container copies it from the host image into a volume the
// sidecar container mounts (--copy-to), so any sidecar image, in any language,
// gets the same probe.
//
// Usage:
//
//	probe [--address unix:///var/run/polyop/sidecar.sock] [--service NAME] [--timeout 1s]
//	probe --copy-to /polyop/bin/probe
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/polyop/polyop/internal/address"
	sdkaddress "github.com/polyop/polyop/sdk/go/address"
)

// defaultAddress is the sidecar's default address, as the host's and the
// SDKs'.
const defaultAddress = sdkaddress.Default

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "polyop probe: %v\n", err)
		os.Exit(1)
	}
}

// run parses args and checks the health service, or copies the binary.
func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	address := fs.String("address", defaultAddress,
		"The gRPC server to check: unix:///abs/path.sock, unix:rel/path.sock, tcp://host:port or host:port.")
	service := fs.String("service", "",
		`The health service to ask about; "" (the default) asks about the server as a whole.`)
	timeout := fs.Duration("timeout", time.Second,
		"How long to wait for the answer; keep it below the Kubernetes probe's timeoutSeconds.")
	copyTo := fs.String("copy-to", "",
		"Copy this binary to the given file and exit, for an init container to give the probe to a container whose image lacks it.")
	verbose := fs.Bool("v", false, "Print the status on success too.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *copyTo != "" {
		return copySelf(*copyTo)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := check(ctx, *address, *service); err != nil {
		return err
	}
	if *verbose {
		fmt.Fprintln(stdout, "SERVING")
	}
	return nil
}

// check asks the health service at address about service and returns nil
// when it answers SERVING.
func check(ctx context.Context, address, service string) error {
	target, err := dialTarget(address)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("%s: %w", address, err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return fmt.Errorf("health check of %s: %w", address, err)
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s reports %s", address, s)
	}
	return nil
}

// dialTarget turns an address, in the forms the host's --sidecar-address
// takes, into a gRPC dial target, as the host does.
func dialTarget(addr string) (string, error) {
	return address.Target(addr, "passthrough")
}

// copySelf copies the running binary to dst, executable by everyone, through
// a temporary file renamed into place, so a container never runs half a
// binary.
func copySelf(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("copying %s to %s: %w", self, dst, err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("copying %s to %s: %w", self, dst, err)
	}
	return nil
}
