package benchmark

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
	benchv1alpha1 "github.com/polyop/polyop/test/benchmark/api/v1alpha1"
	"github.com/polyop/polyop/test/benchmark/widget"
)

// CRDDir is the directory of the benchmark's CRD.
func CRDDir() string {
	return filepath.Join(testenv.RepoRoot(), "test", "benchmark", "config", "crd")
}

// Run builds the programs, then runs every variant at every size, one run
// at a time, then the memory run, and reports what it measured.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts = opts.withDefaults()
	variants, skips, err := selectVariants(opts.Variants)
	if err != nil {
		return nil, err
	}
	var memVariants []Variant
	if opts.MemoryObjects > 0 {
		if memVariants, _, err = selectVariants(opts.MemoryVariants); err != nil {
			return nil, fmt.Errorf("memory run: %w", err)
		}
	}
	report := &Report{Options: opts, Machine: machine(), Started: time.Now(), Skipped: skips}

	// Build while the control plane, when shared, starts.
	binDir, err := os.MkdirTemp("", "polyop-bench-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	b := &bench{opts: opts}
	built := make(chan error, 1)
	go func() {
		var err error
		b.bins, err = buildBinaries(binDir)
		for _, v := range slices.Concat(variants, memVariants) {
			if err == nil && v.prepare != nil {
				err = v.prepare()
			}
		}
		built <- err
	}()
	opts.Logf("building the host and the benchmark's programs")
	var planeErr error
	if opts.SharedControlPlane {
		opts.Logf("starting a control plane")
		if planeErr = b.startControlPlane(ctx); planeErr == nil {
			defer b.stopControlPlane()
		}
	}
	if err := errors.Join(<-built, planeErr); err != nil {
		return nil, err
	}

	for _, n := range opts.Sizes {
		for _, workers := range opts.Workers {
			size, err := b.size(ctx, variants, n, workers)
			report.Skipped = append(report.Skipped, size.skipped...)
			if size.Results != nil || len(size.Rounds) > 0 {
				report.Sizes = append(report.Sizes, size.SizeReport)
			}
			if err != nil {
				return report, err
			}
		}
	}
	if opts.MemoryObjects > 0 {
		size := SizeReport{N: opts.MemoryObjects, Workers: opts.Workers[0]}
		for _, v := range memVariants {
			res, err := b.run(ctx, v, opts.MemoryObjects, opts.Workers[0], true)
			if err != nil {
				return report, fmt.Errorf("memory run, %s with %d Widgets: %w", v.Name, opts.MemoryObjects, err)
			}
			size.Results = append(size.Results, res)
		}
		size.Rounds = [][]*Result{size.Results}
		report.Memory = &size
		report.Footprints = footprints(opts)
	}
	if len(opts.ShardingReplicas) > 0 {
		sharding, err := b.sharding(ctx, report.Memory)
		report.Sharding = sharding
		if err != nil {
			return report, err
		}
	}
	return report, nil
}

// sizeRuns is the runs of one size and number of workers, and the variants
// that failed among them.
type sizeRuns struct {
	SizeReport
	skipped []Skipped
}

// size runs every variant at n Widgets and workers workers, opts.Rounds
// times.
func (b *bench) size(ctx context.Context, variants []Variant, n, workers int) (sizeRuns, error) {
	opts := b.opts
	var out sizeRuns
	size := SizeReport{N: n, Workers: workers}
	failed := make([]error, len(variants))
	for round := range opts.Rounds {
		// Each round starts with another variant, so that no variant
		// always runs first, or right after the same one.
		results := make([]*Result, len(variants))
		for i := range variants {
			k := (i + round) % len(variants)
			v := variants[k]
			if failed[k] != nil {
				continue
			}
			if opts.Rounds > 1 {
				opts.Logf("%d Widgets, %d workers, round %d of %d: %s", n, workers, round+1, opts.Rounds, v.Name)
			}
			res, err := b.run(ctx, v, n, workers, false)
			if err != nil && (v.Baseline || ctx.Err() != nil) {
				out.SizeReport = size
				return out, fmt.Errorf("%s with %d Widgets and %d workers: %w", v.Name, n, workers, err)
			}
			if err != nil {
				// One variant failing does not lose the others' runs.
				opts.Logf("%s with %d Widgets and %d workers failed, and is left out of this size: %v", v.Name, n, workers, err)
				failed[k] = err
				continue
			}
			results[k] = res
		}
		size.Rounds = append(size.Rounds, results)
	}
	size.Rounds = withoutFailed(size.Rounds, failed)
	for k, err := range failed {
		if err != nil {
			out.skipped = append(out.skipped, Skipped{Variant: variants[k],
				Reason: fmt.Sprintf("failed with %s Widgets and %d workers: %v", thousands(n), workers, firstLine(err))})
		}
	}
	size.Results = medianRuns(size.Rounds)
	out.SizeReport = size
	return out, nil
}

// withoutFailed drops, from every round, the variants that failed in any.
func withoutFailed(rounds [][]*Result, failed []error) [][]*Result {
	out := make([][]*Result, len(rounds))
	for r, round := range rounds {
		for k, res := range round {
			if failed[k] == nil {
				out[r] = append(out[r], res)
			}
		}
	}
	return out
}

func firstLine(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

// bench runs the runs of a benchmark.
type bench struct {
	opts Options
	bins binaries

	// env and k8s are the control plane of the benchmark, when it is shared,
	// or of the run in progress.
	env *testenv.Env
	k8s client.WithWatch
}

func (b *bench) startControlPlane(ctx context.Context) error {
	env, err := testenv.Start(CRDDir())
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return errors.Join(err, env.Stop())
	}
	if err := benchv1alpha1.AddToScheme(scheme); err != nil {
		return errors.Join(err, env.Stop())
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // the harness must never be what limits a run
	k8s, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return errors.Join(err, env.Stop())
	}
	if err := warmup(ctx, k8s, b.opts); err != nil {
		return errors.Join(err, env.Stop())
	}
	b.env, b.k8s = env, k8s
	return nil
}

func (b *bench) stopControlPlane() {
	if b.env == nil {
		return
	}
	if err := b.env.Stop(); err != nil {
		b.opts.Logf("stopping the control plane: %v", err)
	}
	b.env, b.k8s = nil, nil
}

// run is one run: one variant reconciling n Widgets.
func (b *bench) run(ctx context.Context, v Variant, n, workers int, memory bool) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.runTimeout(n))
	defer cancel()
	if !b.opts.SharedControlPlane {
		b.opts.Logf("%s, %d Widgets, %d workers: starting a control plane", v.Name, n, workers)
		if err := b.startControlPlane(ctx); err != nil {
			return nil, err
		}
		defer b.stopControlPlane()
	}
	r := &run{bench: b, variant: v, n: n, workers: workers, memory: memory, res: &Result{Variant: v, N: n, Workers: workers}}
	defer r.stop()
	if err := r.do(ctx); err != nil {
		return nil, errors.Join(err, r.diagnose())
	}
	return r.res, nil
}

// run is the state of one run.
type run struct {
	*bench
	variant Variant
	n       int
	workers int  // the controller's max concurrent reconciles
	memory  bool // the memory run, which skips the no-op wave
	ns      string
	dir     string
	res     *Result

	operator *process // the baseline, or the host
	sidecar  *process // nil for the baseline
	metrics  string   // the operator's metrics URL
	pprof    string   // the operator's pprof address, when profiling
	scPprof  string   // the Go sidecar's pprof address, when profiling
	profiles sync.WaitGroup
}

// String names the run in the harness's progress: variant, size, workers.
func (r *run) String() string {
	return fmt.Sprintf("%s, %d Widgets, %d workers", r.variant.Name, r.n, r.workers)
}

// snapshot is what the harness reads at one moment of a run.
type snapshot struct {
	at       time.Time
	metrics  metrics
	operator procStats
	sidecar  procStats
}

func (r *run) do(ctx context.Context) error {
	log := r.opts.Logf
	r.ns = fmt.Sprintf("bench-%s-%d-%d-%s", r.variant.Name, r.n, r.workers, rand.String(5))
	if err := r.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", r.ns, err)
	}
	// A short directory: a unix socket's path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "pb-")
	if err != nil {
		return err
	}
	r.dir = dir
	if err := r.start(ctx); err != nil {
		return err
	}
	// The controller starts its workers once its caches have synced.
	if err := r.operator.WaitForOutput(ctx, "Starting workers"); err != nil {
		return err
	}
	log("%s: started in namespace %s; creating the Widgets", r, r.ns)

	tracker := trackReady(ctx, r.k8s, r.ns, r.n)
	before, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	// The host takes its workers from the sidecar's declaration: check that
	// every variant runs the workers asked for.
	r.res.Workers = int(before.metrics.sum(metricMaxConcurrent, labels{"controller": widget.ControllerName}))
	if r.res.Workers != r.workers {
		return fmt.Errorf("the %s controller runs %d workers (%s), want %d", widget.ControllerName, r.res.Workers, metricMaxConcurrent, r.workers)
	}
	r.startCPUProfiles(ctx)
	if err := r.createWidgets(ctx); err != nil {
		return err
	}
	r.res.Create = time.Since(before.at)

	if err := r.wait(ctx, tracker.done, func() string {
		ready, _, err := tracker.state()
		return fmt.Sprintf("%d of %d Widgets ready (watch error: %v)", ready, r.n, err)
	}); err != nil {
		return fmt.Errorf("waiting for every Widget to be ready: %w", err)
	}
	_, doneAt, _ := tracker.state()
	atReady, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	r.res.Convergence = doneAt.Sub(before.at)
	log("%s: created in %s, all ready after %s; waiting for the reconciles to stop",
		r, r.res.Create.Round(time.Millisecond), r.res.Convergence.Round(time.Millisecond))

	settled, err := r.settle(ctx)
	if err != nil {
		return err
	}
	log("%s: settled; steady state for %s", r, r.opts.Steady)
	if err := r.sleep(ctx, r.opts.Steady); err != nil {
		return err
	}
	steady, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	r.res.fill(before, atReady, settled, steady)

	if !r.opts.SkipNoopWave && !r.memory {
		log("%s: touching every ConfigMap (a reconcile each, with nothing to change)", r)
		if err := r.noopWave(ctx, steady); err != nil {
			return err
		}
	}
	if err := r.check(ctx); err != nil {
		return err
	}
	r.heapProfile(ctx)
	r.profiles.Wait()
	final, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	r.res.Operator.PeakRSS, r.res.Operator.RSS, r.res.Operator.AnonRSS = final.operator.PeakRSS, final.operator.RSS, final.operator.AnonRSS
	r.res.Sidecar.PeakRSS, r.res.Sidecar.RSS, r.res.Sidecar.AnonRSS = final.sidecar.PeakRSS, final.sidecar.RSS, final.sidecar.AnonRSS
	r.res.Operator.HeapInuse = int64(final.metrics.sum(metricHeapInuse, nil))
	return nil
}

// start starts the variant's processes.
func (r *run) start(ctx context.Context) error {
	metricsAddr, err := freeAddress()
	if err != nil {
		return err
	}
	r.metrics = "http://" + metricsAddr + "/metrics"
	if r.opts.ProfileDir != "" {
		if r.pprof, err = freeAddress(); err != nil {
			return err
		}
		if !r.variant.Baseline {
			if r.scPprof, err = freeAddress(); err != nil {
				return err
			}
		}
	}
	logPath := func(name string) string {
		if r.opts.LogDir == "" {
			return ""
		}
		return filepath.Join(r.opts.LogDir, fmt.Sprintf("%s-%d-w%d-%s.log", r.variant.Name, r.n, r.workers, name))
	}
	if r.opts.LogDir != "" {
		if err := os.MkdirAll(r.opts.LogDir, 0o755); err != nil {
			return err
		}
	}

	if r.variant.Baseline {
		args := []string{
			"--kubeconfig", r.env.Kubeconfig,
			"--namespace", r.ns,
			"--metrics-bind-address", metricsAddr,
			"--max-concurrent-reconciles", fmt.Sprint(r.workers),
		}
		if r.pprof != "" {
			args = append(args, "--pprof-bind-address", r.pprof)
		}
		r.operator, err = startProcess("in-process operator", r.bins.inprocess, args, r.opts.Env, logPath("operator"))
		return err
	}

	var address string
	switch r.variant.Transport {
	case Unix:
		address = "unix://" + filepath.Join(r.dir, "sidecar.sock")
	case TCP:
		addr, err := freeAddress()
		if err != nil {
			return err
		}
		address = "tcp://" + addr
	default:
		return fmt.Errorf("variant %s: unknown transport %q", r.variant.Name, r.variant.Transport)
	}
	bin, args := r.variant.sidecar(r.bins, address, r.workers)
	if r.scPprof != "" && bin == r.bins.goSidecar {
		args = append(args, "--pprof-bind-address", r.scPprof)
	} else {
		r.scPprof = ""
	}
	if r.sidecar, err = startProcess("sidecar", bin, args, slices.Concat(r.opts.Env, r.opts.SidecarEnv), logPath("sidecar")); err != nil {
		return err
	}
	hostArgs := []string{
		"--kubeconfig", r.env.Kubeconfig,
		"--sidecar-address", address,
		"--namespace", r.ns,
		"--health-probe-bind-address", "0",
		"--metrics-bind-address", metricsAddr,
		"--metrics-secure=false",
	}
	if r.pprof != "" {
		hostArgs = append(hostArgs, "--pprof-bind-address", r.pprof)
	}
	hostArgs = append(append(hostArgs, r.variant.hostArgs...), r.opts.HostArgs...)
	r.operator, err = startProcess("host", r.bins.host, hostArgs, r.opts.Env, logPath("host"))
	return err
}

// stop stops the processes, the host before its sidecar.
func (r *run) stop() {
	if r.operator != nil {
		r.operator.Stop()
	}
	if r.sidecar != nil {
		r.sidecar.Stop()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

// alive fails once a process of the run has exited.
func (r *run) alive() error {
	for _, p := range []*process{r.operator, r.sidecar} {
		if p != nil && p.Exited() {
			return fmt.Errorf("%w: %w", errProcessExited, p.ExitError())
		}
	}
	return nil
}

// wait waits for done, failing if ctx ends or a process exits first; what
// describes the progress for the error.
func (r *run) wait(ctx context.Context, done <-chan struct{}, what func() string) error {
	return waitAlive(ctx, done, what, r.alive)
}

// waitAlive waits for done, failing if ctx ends first or alive fails, which
// it checks every 100ms; what describes the progress for the error.
func waitAlive(ctx context.Context, done <-chan struct{}, what func() string, alive func() error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%w; %s", ctx.Err(), what())
		case <-tick.C:
			if err := alive(); err != nil {
				return err
			}
		}
	}
}

// sleep waits d, failing if a process exits meanwhile.
func (r *run) sleep(ctx context.Context, d time.Duration) error {
	done := make(chan struct{})
	timer := time.AfterFunc(d, func() { close(done) })
	defer timer.Stop()
	return r.wait(ctx, done, func() string { return "sleeping" })
}

// snapshot scrapes the operator's metrics and reads /proc.
func (r *run) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now()}
	var err error
	if s.operator, err = readProc(r.operator.Pid()); err != nil {
		return s, errors.Join(err, r.alive())
	}
	if r.sidecar != nil {
		if s.sidecar, err = readProc(r.sidecar.Pid()); err != nil {
			return s, errors.Join(err, r.alive())
		}
	}
	if s.metrics, err = scrape(ctx, r.metrics); err != nil {
		return s, errors.Join(err, r.alive())
	}
	return s, nil
}

// reconciles is the number of Widget reconciles a snapshot counts.
func (s snapshot) reconciles() float64 {
	return s.metrics.widgetReconciles()
}

// settle waits until the reconciles have stopped: the count unchanged and the
// workqueue empty for a second.
func (r *run) settle(ctx context.Context) (snapshot, error) {
	last, _, err := settleOn(ctx, r.opts.settleQuiet, r.sleep, func(ctx context.Context) ([]snapshot, error) {
		s, err := r.snapshot(ctx)
		return []snapshot{s}, err
	})
	if len(last) == 0 {
		return snapshot{}, err
	}
	return last[0], err
}

// settleOn takes snapshots (take, every 200 ms, sleep waiting between them)
// until the Widget reconciles they count together have not changed, and no
// Widget was queued, for quiet. It returns the snapshots of the last change,
// where the reconciles stopped, and when they were taken.
func settleOn(ctx context.Context, quiet time.Duration, sleep func(context.Context, time.Duration) error,
	take func(context.Context) ([]snapshot, error)) ([]snapshot, time.Time, error) {
	count := func(snaps []snapshot) (reconciles, depth float64) {
		for _, s := range snaps {
			reconciles += s.reconciles()
			depth += s.metrics.sum(metricWorkqueueDepth, labels{"name": widget.ControllerName})
		}
		return reconciles, depth
	}
	last, err := take(ctx)
	if err != nil {
		return last, time.Time{}, err
	}
	since := time.Now()
	for {
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return last, since, fmt.Errorf("waiting for the reconciles to stop: %w", err)
		}
		at := time.Now()
		snaps, err := take(ctx)
		if err != nil {
			return snaps, since, err
		}
		was, _ := count(last)
		now, depth := count(snaps)
		if now != was || depth > 0 {
			last, since = snaps, at
			continue
		}
		if at.Sub(since) >= quiet {
			return last, since, nil
		}
	}
}

// createWidgets creates the n Widgets, opts.Creators at a time.
func (r *run) createWidgets(ctx context.Context) error {
	names := make(chan int)
	errs := make(chan error, r.opts.Creators)
	var wg sync.WaitGroup
	for range r.opts.Creators {
		wg.Go(func() {
			for i := range names {
				if err := r.k8s.Create(ctx, newWidget(r.ns, i, r.opts)); err != nil {
					errs <- fmt.Errorf("creating Widget %d: %w", i, err)
					return
				}
			}
		})
	}
	var err error
loop:
	for i := range r.n {
		select {
		case names <- i:
		case err = <-errs:
			break loop
		}
	}
	close(names)
	wg.Wait()
	close(errs)
	if err != nil {
		return err
	}
	return <-errs
}

// newWidget is the i-th Widget of a run.
func newWidget(namespace string, i int, opts Options) *benchv1alpha1.Widget {
	data := make(map[string]string, opts.DataEntries)
	for k := range opts.DataEntries {
		data[fmt.Sprintf("key-%d", k)] = strings.Repeat(string(rune('a'+(i+k)%26)), opts.ValueBytes)
	}
	return &benchv1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("widget-%05d", i),
			Namespace: namespace,
			Labels:    map[string]string{"app.kubernetes.io/name": "widget", "bench.polyop.dev/index": fmt.Sprint(i)},
		},
		Spec: benchv1alpha1.WidgetSpec{Data: data},
	}
}

// noopWave annotates every ConfigMap, which reconciles its Widget once with
// nothing to change, and measures what those reconciles cost.
func (r *run) noopWave(ctx context.Context, before snapshot) error {
	cms := &corev1.ConfigMapList{}
	if err := r.k8s.List(ctx, cms, client.InNamespace(r.ns), client.HasLabels{widget.WidgetLabel}); err != nil {
		return fmt.Errorf("listing the ConfigMaps: %w", err)
	}
	// One at a time: the wave measures reconciles that find nothing to do,
	// not how the controllers queue under a flood, so the machine is kept
	// below saturation.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"bench.polyop.dev/touched":"true"}}}`))
	for i := range cms.Items {
		if err := r.k8s.Patch(ctx, &cms.Items[i], patch); err != nil {
			return fmt.Errorf("annotating ConfigMap %s: %w", cms.Items[i].Name, err)
		}
		if i%100 == 0 {
			if err := r.alive(); err != nil {
				return err
			}
		}
	}
	// Wait for a reconcile per ConfigMap, then for the reconciles to stop.
	want := before.reconciles() + float64(len(cms.Items))
	deadline := time.Now().Add(time.Minute + time.Duration(r.n)*10*time.Millisecond)
	for {
		s, err := r.snapshot(ctx)
		if err != nil {
			return err
		}
		if s.reconciles() >= want {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after touching %d ConfigMaps, only %.0f of them reconciled their Widget", len(cms.Items), s.reconciles()-before.reconciles())
		}
		if err := r.sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	after, err := r.settle(ctx)
	if err != nil {
		return err
	}
	r.res.NoopWave = &WaveResult{
		Touched:    len(cms.Items),
		Reconciles: after.reconciles() - before.reconciles(),
		Requests:   requestsBetween(before, after),
	}
	r.res.NoopWave.Latency, r.res.NoopWave.Hop = latencies(before, after, r.variant)
	r.res.NoopWave.OperatorCPU = after.operator.CPU - before.operator.CPU
	r.res.NoopWave.SidecarCPU = after.sidecar.CPU - before.sidecar.CPU
	r.opts.Logf("%s: no-op wave: reconcile p50 %s p99 %s; sidecar call p50 %s p99 %s", r,
		r.res.NoopWave.Latency.P50, r.res.NoopWave.Latency.P99, r.res.NoopWave.Hop.P50, r.res.NoopWave.Hop.P99)
	return nil
}

// check counts what the run left: ready Widgets, and ConfigMaps controlled
// by their Widget.
func (r *run) check(ctx context.Context) error {
	widgets := &benchv1alpha1.WidgetList{}
	if err := r.k8s.List(ctx, widgets, client.InNamespace(r.ns)); err != nil {
		return err
	}
	uids := map[types.UID]string{}
	for i := range widgets.Items {
		w := &widgets.Items[i]
		if widget.IsReady(w) {
			r.res.ReadyAtEnd++
		}
		uids[w.UID] = w.Name
	}
	cms := &corev1.ConfigMapList{}
	if err := r.k8s.List(ctx, cms, client.InNamespace(r.ns), client.HasLabels{widget.WidgetLabel}); err != nil {
		return err
	}
	for i := range cms.Items {
		ref := metav1.GetControllerOf(&cms.Items[i])
		if ref != nil && uids[ref.UID] == cms.Items[i].Name && len(cms.Items[i].Data) == r.opts.DataEntries {
			r.res.OwnedConfigMaps++
		}
	}
	return nil
}

// startCPUProfiles fetches CPU profiles of the operator and the Go sidecar
// in the background, when profiling.
func (r *run) startCPUProfiles(ctx context.Context) {
	if r.opts.ProfileDir == "" {
		return
	}
	url := func(addr string) string {
		return fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, r.opts.ProfileSeconds)
	}
	r.fetchProfile(ctx, url(r.pprof), "cpu-"+r.processName())
	if r.scPprof != "" {
		r.fetchProfile(ctx, url(r.scPprof), "cpu-sidecar")
	}
}

// heapProfile fetches a heap profile of the operator, when profiling.
func (r *run) heapProfile(ctx context.Context) {
	if r.opts.ProfileDir == "" {
		return
	}
	r.fetchProfile(ctx, "http://"+r.pprof+"/debug/pprof/heap?gc=1", "heap-"+r.processName())
}

func (r *run) processName() string {
	if r.variant.Baseline {
		return "operator"
	}
	return "host"
}

func (r *run) fetchProfile(ctx context.Context, url, name string) {
	path := filepath.Join(r.opts.ProfileDir, fmt.Sprintf("%s-%d-w%d-%s.pprof", r.variant.Name, r.n, r.workers, name))
	r.profiles.Go(func() {
		if err := download(ctx, url, path); err != nil {
			r.opts.Logf("profile %s: %v", name, err)
		}
	})
}

func download(ctx context.Context, url, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// diagnose returns the tail of every process's output, for a failed run.
func (r *run) diagnose() error {
	var b strings.Builder
	for _, p := range []*process{r.operator, r.sidecar} {
		if p == nil {
			continue
		}
		fmt.Fprintf(&b, "--- %s output (last lines) ---\n%s\n", p.Name, tail(p.Output(), 30))
	}
	if b.Len() == 0 {
		return nil
	}
	return errors.New(b.String())
}

// freeAddress returns a loopback address with a port that is free now.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
