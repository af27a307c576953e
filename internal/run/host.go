package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/sidecarprocess"
	"github.com/polyop/polyop/internal/version"
)

// describe waits for the sidecar to serve and asks it what it implements,
// resolved against the cluster: whether it declares webhooks decides how the
// host is started.
func (r *runner) describe(ctx context.Context) (*description.Resolved, error) {
	c, err := sidecar.New(sidecar.Options{Address: r.address})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r.console.printf("waiting up to %s for the sidecar at %s", r.o.Timeout, r.address)
	err = sidecarprocess.WaitServing(ctx, c, r.sidecarDone(), r.o.Timeout)
	var desc *description.Description
	if err == nil {
		raw, derr := c.DescribeRaw(ctx, version.Version)
		if err = derr; err == nil {
			desc, err = description.NewDescription(raw)
		}
	}
	if err != nil {
		select {
		case <-r.sidecarDone():
			return nil, r.sidecar.ExitedError()
		default:
		}
		return nil, fmt.Errorf("asking the sidecar at %s to describe itself: %w", r.address, err)
	}
	res, err := description.Resolve(r.cluster.client.RESTMapper(), desc, description.ResolveOptions{})
	if err != nil {
		return nil, fmt.Errorf("the sidecar %q: %w", desc.Name, err)
	}
	r.console.printf("the sidecar %q reconciles %d kind(s) and declares %d webhook(s) and %d conversion(s)",
		desc.Name, len(desc.Controllers), len(desc.Webhooks), len(desc.Conversions))
	return res, nil
}

// hostAddresses are where the host serves, all on 127.0.0.1.
type hostAddresses struct {
	health, metrics string
}

// startHost starts the host pointed at the sidecar, with health probes and
// metrics over plain HTTP on free local ports, and, when the sidecar declares
// webhooks, its webhook server on one more with a certificate of the run's
// own CA.
func (r *runner) startHost(res *description.Resolved) error {
	health, err := freeLocalAddress()
	if err != nil {
		return err
	}
	metrics, err := freeLocalAddress()
	if err != nil {
		return err
	}
	r.hostAddr = hostAddresses{health: health, metrics: metrics}
	args := append(append([]string{}, r.cluster.kubeconfigArgs...),
		"--sidecar-address", r.address,
		"--health-probe-bind-address", health,
		"--metrics-bind-address", metrics,
		"--metrics-secure=false",
	)
	if len(res.Webhooks) > 0 || len(res.Conversions) > 0 {
		w, err := newLocalWebhooks(res, r.tmpDir)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.webhooks = w
		r.mu.Unlock()
		args = append(args, r.webhooks.hostArgs()...)
	} else {
		args = append(args, "--webhook-port", "0")
	}
	if addr := r.clusterAddress(); addr != "" {
		args = append(args, "--cluster-address", addr)
		r.console.printf("the host serves the Cluster service at %s: a sidecar you run yourself reads the cluster with POLYOP_CLUSTER_ADDRESS=%s", addr, addr)
	}
	args = append(args, r.o.HostArgs...)

	program, err := r.hostProgram()
	if err != nil {
		return err
	}
	ch, err := startChild(r.console, "host", program[0], append(program[1:], args...), environ(r.cluster.env), r.exited)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.host = ch
	r.mu.Unlock()
	r.console.printf("started the host (pid %d); metrics at http://%s/metrics, readiness at http://%s/readyz?verbose",
		r.host.cmd.Process.Pid, r.hostAddr.metrics, r.hostAddr.health)
	return nil
}

// hostProgram is the host's program and its first arguments: --host-binary,
// or this polyop's host command.
func (r *runner) hostProgram() ([]string, error) {
	if r.o.HostBinary != "" {
		return []string{r.o.HostBinary}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding polyop's own program to run the host with (pass --host-binary): %w", err)
	}
	return []string{self, HostCommandName}, nil
}

// waitHostReady waits until the host's readiness probe passes: the sidecar
// is healthy, and the webhook server, when there is one, serves.
func (r *runner) waitHostReady(ctx context.Context) error {
	url := "http://" + r.hostAddr.health + "/readyz?verbose"
	r.console.printf("waiting up to %s for the host to be ready (%s)", r.o.Timeout, url)
	client := &http.Client{Timeout: 2 * time.Second}
	last := "no answer yet"
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, r.o.Timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case ch := <-r.exited:
			return false, ch.exitError()
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = resp.Status
		if resp.StatusCode != http.StatusOK {
			// ?verbose says why: the sidecar's address and state, the
			// informers not synced, the webhook server not started.
			if why := failedChecks(resp.Body); why != "" {
				last = why
			}
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return fmt.Errorf("the host was not ready within %s (%s: %s); its output above says why", r.o.Timeout, url, last)
	}
	return nil
}

// failedChecks returns the lines of the failed checks in a /readyz?verbose
// answer, joined by "; ".
func failedChecks(body io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var failed []string
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "[-]"); ok {
			failed = append(failed, rest)
		}
	}
	return strings.Join(failed, "; ")
}

// freeLocalAddress returns 127.0.0.1 and a port free at the time of the call.
func freeLocalAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}

// printReady says where everything is.
func (r *runner) printReady() {
	p := r.console.printf
	p("%s:", ReadyLine)
	if r.cluster.kubeconfig != "" {
		p("  export KUBECONFIG=%s", r.cluster.kubeconfig)
	}
	p("  health:   http://%s/healthz and http://%s/readyz", r.hostAddr.health, r.hostAddr.health)
	p("  metrics:  http://%s/metrics", r.hostAddr.metrics)
	if r.webhooks != nil {
		p("  webhooks: %s (CA %s)", r.webhooks.url, r.webhooks.caFile())
	}
	p("  sidecar:  %s", r.address)
}

// clusterAddress is where the host serves the Cluster service to the
// sidecar, when the host's default does not suit a run: beside a unix
// socket sidecar address, the host's default puts it next to the sidecar's
// socket, where the SDKs look; for any other address the default is
// /var/run/polyop/cluster.sock, the pod's shared volume, which a user's
// machine rarely lets them create, so the run's own folder holds it. ""
// when the host's default stands, or the user passed --cluster-address
// to the host.
func (r *runner) clusterAddress() string {
	if strings.HasPrefix(r.address, "unix://") {
		return ""
	}
	for _, arg := range r.o.HostArgs {
		if arg == "--cluster-address" || strings.HasPrefix(arg, "--cluster-address=") {
			return ""
		}
	}
	return "unix://" + filepath.Join(r.tmpDir, "cluster.sock")
}
