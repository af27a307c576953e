package benchmark

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Report is the outcome of a benchmark.
type Report struct {
	// Command is the command that ran the benchmark, for the report's first
	// line. Defaults to "make bench".
	Command string
	// Machine describes the machine: CPU, cores, memory, kernel, Go.
	Machine string
	// Started is when the benchmark started.
	Started time.Time
	// Options are the options it ran with, defaults applied.
	Options Options
	// Sizes holds the runs of every size, in the order of Options.Sizes.
	Sizes []SizeReport
	// Memory holds the memory run; nil when skipped.
	Memory *SizeReport
	// Skipped lists the variants that could not run here, and why.
	Skipped []Skipped
	// Footprints are the memory a cached Widget and ConfigMap take, typed,
	// as object.Objects and unstructured; measured with the memory run.
	Footprints []Footprint
	// Sharding holds the sharding runs; nil when skipped.
	Sharding *ShardingReport
}

// SizeReport holds the runs of one size, the baseline's first.
type SizeReport struct {
	// N is the number of Widgets.
	N int
	// Workers is the Widget controller's max concurrent reconciles in every
	// variant.
	Workers int
	// Results are the runs the report shows, one per variant: with several
	// rounds, each variant's median run by throughput.
	Results []*Result
	// Rounds are every run, by round and then by variant, in the order of
	// Results.
	Rounds [][]*Result
}

// medianRuns picks each variant's run of median throughput from the rounds.
func medianRuns(rounds [][]*Result) []*Result {
	if len(rounds) == 0 {
		return nil
	}
	out := make([]*Result, len(rounds[0]))
	for i := range out {
		runs := make([]*Result, 0, len(rounds))
		for _, round := range rounds {
			runs = append(runs, round[i])
		}
		sort.Slice(runs, func(a, b int) bool { return runs[a].Throughput() < runs[b].Throughput() })
		out[i] = runs[(len(runs)-1)/2]
	}
	return out
}

// throughputRatios returns, for the variant at index i, its throughput
// divided by the baseline's of the same round, for every round, and their
// median: pairs of runs close in time share the machine's mood.
func (s SizeReport) throughputRatios(i int) (ratios []float64, median float64) {
	return s.roundRatios(i, s.baselineIndex(), (*Result).Throughput)
}

// roundRatios returns f of the variant at index i divided by f of the
// variant at index j, for every round, and their median.
func (s SizeReport) roundRatios(i, j int, f func(*Result) float64) (ratios []float64, median float64) {
	for _, round := range s.Rounds {
		ratios = append(ratios, f(round[i])/f(round[j]))
	}
	return ratios, medianOf(ratios)
}

func medianOf(xs []float64) float64 {
	sorted := append([]float64(nil), xs...)
	sort.Float64s(sorted)
	n := len(sorted)
	switch {
	case n == 0:
		return math.NaN()
	case n%2 == 1:
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// baselineIndex is the index of the baseline among the results.
func (s SizeReport) baselineIndex() int {
	for j, r := range s.Results {
		if r.Variant.Baseline {
			return j
		}
	}
	return 0
}

// variantIndex is the index of the variant named name, or -1.
func (s SizeReport) variantIndex(name string) int {
	for j, r := range s.Results {
		if r.Variant.Name == name {
			return j
		}
	}
	return -1
}

// Baseline is the run of the in-process baseline.
func (s SizeReport) Baseline() *Result {
	for _, r := range s.Results {
		if r.Variant.Baseline {
			return r
		}
	}
	return nil
}

// BeginMarker and EndMarker enclose the generated section of BENCHMARKS.md.
const (
	BeginMarker = "<!-- begin make bench: written by `make bench BENCH_ARGS=-update`; edit around it, not in it -->"
	EndMarker   = "<!-- end make bench -->"
)

// Markdown renders the report: the command and machine, a table of speed and
// a table of cost per size, the memory run, and the goals.
func (rep *Report) Markdown() string {
	var b strings.Builder
	o := rep.Options
	command := rep.Command
	if command == "" {
		command = "make bench"
	}
	fmt.Fprintf(&b, "`%s` on %s, %s.\n\n", command, rep.Machine, rep.Started.UTC().Format("2006-01-02"))
	plane := "a fresh control plane (envtest: kube-apiserver and etcd) per run"
	if o.SharedControlPlane {
		plane = "one control plane (envtest) for every run, a namespace each"
	}
	rounds := "one round"
	if o.Rounds > 1 {
		rounds = fmt.Sprintf("%d rounds, each variant's median run by throughput shown", o.Rounds)
	}
	workers := make([]string, len(o.Workers))
	for i, w := range o.Workers {
		workers[i] = fmt.Sprint(w)
	}
	fmt.Fprintf(&b, "Each Widget carries %d × %d B of data; every size runs with %s worker(s) (the controller's max "+
		"concurrent reconciles); %s; runs one after another, %s. Ratios (×) are against the in-process baseline of "+
		"the same size and workers: below 1 is better for times, CPU and memory, above 1 for throughput.\n",
		o.DataEntries, o.ValueBytes, strings.Join(workers, " and "), plane, rounds)

	for _, s := range rep.Sizes {
		fmt.Fprintf(&b, "\n#### %s Widgets, %s\n\n", thousands(s.N), workersText(s.Workers))
		speedTable(&b, s)
		b.WriteString("\n")
		costTable(&b, s)
	}
	if rep.Memory != nil {
		fmt.Fprintf(&b, "\n#### Memory with %s Widgets cached\n\n", thousands(rep.Memory.N))
		memoryTable(&b, *rep.Memory)
	}
	if len(rep.Footprints) > 0 {
		fmt.Fprintf(&b, "\nWhat one cached object takes, decoded %s times in the harness from its JSON (managedFields stripped), "+
			"into its Go type as the baseline caches it, into the host's object.Object (metadata decoded, the rest kept as JSON), "+
			"and, for comparison, into map[string]any as an unstructured cache would:\n\n", thousands(footprintObjects))
		b.WriteString("| object | JSON | typed (baseline) | object.Object (host) | unstructured |\n| --- | ---: | ---: | ---: | ---: |\n")
		for _, f := range rep.Footprints {
			fmt.Fprintf(&b, "| %s | %d B | %.0f B | %.0f B (%.2f×) | %.0f B (%.2f×) |\n", f.Kind, f.JSON, f.Typed, f.Object, f.Object/f.Typed, f.Unstructured, f.Unstructured/f.Typed)
		}
	}
	if rep.Sharding != nil {
		rep.Sharding.markdown(&b)
	}
	if len(rep.Skipped) > 0 {
		b.WriteString("\nNot run:\n")
		for _, s := range rep.Skipped {
			fmt.Fprintf(&b, "- %s: %s.\n", s.Variant.Title, s.Reason)
		}
	}
	if goals := rep.goals(); len(goals) > 0 {
		b.WriteString("\n#### Goals\n\n| goal | variant | measured | |\n| --- | --- | --- | --- |\n")
		for _, g := range goals {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.goal, g.variant, g.measured, g.verdict)
		}
	}
	return b.String()
}

// workersText is "1 worker" or "n workers".
func workersText(n int) string { return countText(n, "worker") }

// countText is n of unit, as "1 worker" or "5 workers".
func countText(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

func speedTable(b *strings.Builder, s SizeReport) {
	base := s.Baseline()
	b.WriteString("| variant | converged | Widgets/s | reconciles/s | reconciles per Widget | reconcile p50 | reconcile p99 | no-op reconcile p50 / p99 | sidecar call p50 / p99 |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range s.Results {
		isBase := r == base
		hop := "—"
		if !r.Variant.Baseline {
			hop = ms(r.Hop.P50) + " / " + ms(r.Hop.P99)
			if r.Reconciles > 0 {
				hop += fmt.Sprintf(", %.2f per reconcile", r.SidecarCalls/r.Reconciles)
			}
		}
		noop := "—"
		if w, bw := r.NoopWave, base.NoopWave; w != nil && bw != nil {
			noop = ms(w.Latency.P50) + " / " + ms(w.Latency.P99)
			if !isBase {
				noop += fmt.Sprintf(" (%s / %s)", signedMs(w.Latency.P50-bw.Latency.P50), signedMs(w.Latency.P99-bw.Latency.P99))
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Variant.Title,
			withRatio(seconds(r.Convergence), r.Convergence.Seconds(), base.Convergence.Seconds(), isBase),
			withRatio(fmt.Sprintf("%.0f", r.Throughput()), r.Throughput(), base.Throughput(), isBase),
			withRatio(fmt.Sprintf("%.0f", r.ReconcileRate()), r.ReconcileRate(), base.ReconcileRate(), isBase),
			withRatio(fmt.Sprintf("%.2f", r.ReconcilesPerObject()), r.ReconcilesPerObject(), base.ReconcilesPerObject(), isBase),
			withRatio(ms(r.Latency.P50), float64(r.Latency.P50), float64(base.Latency.P50), isBase),
			withRatio(ms(r.Latency.P99), float64(r.Latency.P99), float64(base.Latency.P99), isBase),
			noop, hop)
	}
	b.WriteString("\nA no-op reconcile is one of the no-op wave: its Widget and ConfigMap are as they should be, so it writes " +
		"nothing, and for a sidecar variant it is mostly the hop; beside it, the difference from the baseline's. " +
		"The sidecar call is the host's Reconcile call to the sidecar, from the first create until the reconciles stopped, " +
		"and how many the host made per reconcile (fewer than one when it skips calls whose inputs are unchanged).\n")
}

func costTable(b *strings.Builder, s SizeReport) {
	base := s.Baseline()
	b.WriteString("| variant | CPU per reconcile | host's CPU per reconcile | no-op CPU per reconcile | API requests per reconcile (GETs) | CPU | peak RSS | idle: reconciles, requests | no-op wave: reconciles, requests |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range s.Results {
		isBase := r == base
		cpu := seconds(r.CPU())
		rss := mib(r.Operator.PeakRSS + r.Sidecar.PeakRSS)
		perReconcileCPU := ms(r.CPUPerReconcile())
		hostCPU := "—"
		if !r.Variant.Baseline {
			cpu += fmt.Sprintf(" = %s + %s", seconds(r.Operator.CPU), seconds(r.Sidecar.CPU))
			rss += fmt.Sprintf(" = %s + %s", mib(r.Operator.PeakRSS), mib(r.Sidecar.PeakRSS))
			perReconcileCPU += fmt.Sprintf(" = %s + %s", ms(perReconcile(r.Operator.CPU, r.Reconciles)), ms(perReconcile(r.Sidecar.CPU, r.Reconciles)))
			hostCPU = withRatio(ms(perReconcile(r.Operator.CPU, r.Reconciles)),
				float64(perReconcile(r.Operator.CPU, r.Reconciles)), float64(base.CPUPerReconcile()), false)
		}
		wave, waveCPU := "skipped", "—"
		if w := r.NoopWave; w != nil {
			wave = fmt.Sprintf("%.0f, %.0f", w.Reconciles, total(w.Requests))
			waveCPU = ms(w.CPUPerReconcile())
			if bw := base.NoopWave; bw != nil {
				waveCPU = withRatio(waveCPU, float64(w.CPUPerReconcile()), float64(bw.CPUPerReconcile()), isBase)
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %.0f, %.0f in %s | %s |\n",
			r.Variant.Title,
			withRatio(perReconcileCPU, float64(r.CPUPerReconcile()), float64(base.CPUPerReconcile()), isBase),
			hostCPU,
			waveCPU,
			withRatio(fmt.Sprintf("%.2f (%.2f)", r.RequestsPerReconcile(), r.ReadsPerReconcile()),
				r.RequestsPerReconcile(), base.RequestsPerReconcile(), isBase),
			withRatio(cpu, r.CPU().Seconds(), base.CPU().Seconds(), isBase),
			withRatio(rss, float64(r.Operator.PeakRSS+r.Sidecar.PeakRSS), float64(base.Operator.PeakRSS), isBase),
			r.SteadyReconciles, r.SteadyRequests, seconds(r.Steady), wave)
	}
	b.WriteString("\nCPU is from the first create until the reconciles stopped, and CPU per reconcile that divided by the " +
		"reconciles meanwhile; for a sidecar variant it is host + sidecar, and every ratio is to the baseline's one " +
		"process (the host's alone too). No-op CPU per reconcile is the processes' CPU during the no-op wave (the " +
		"harness paces it, so what they spend idle meanwhile counts too) divided by its reconciles. Peak RSS of a " +
		"sidecar variant is host + sidecar.\n")
}

func memoryTable(b *strings.Builder, s SizeReport) {
	base := s.Baseline()
	b.WriteString("| variant | operator or host: peak RSS | RSS at the end | of which anonymous | Go heap in use | sidecar peak RSS | sidecar anonymous at the end | converged |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range s.Results {
		isBase := r == base
		sidecar, sidecarAnon := "—", "—"
		if !r.Variant.Baseline {
			sidecar, sidecarAnon = mib(r.Sidecar.PeakRSS), mib(r.Sidecar.AnonRSS)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Variant.Title,
			withRatio(mib(r.Operator.PeakRSS), float64(r.Operator.PeakRSS), float64(base.Operator.PeakRSS), isBase),
			withRatio(mib(r.Operator.RSS), float64(r.Operator.RSS), float64(base.Operator.RSS), isBase),
			withRatio(mib(r.Operator.AnonRSS), float64(r.Operator.AnonRSS), float64(base.Operator.AnonRSS), isBase),
			withRatio(mib(r.Operator.HeapInuse), float64(r.Operator.HeapInuse), float64(base.Operator.HeapInuse), isBase),
			sidecar, sidecarAnon,
			withRatio(seconds(r.Convergence), r.Convergence.Seconds(), base.Convergence.Seconds(), isBase))
	}
	b.WriteString("\nThe anonymous part of RSS is the heap and the stacks; the rest is mostly the program itself, mapped " +
		"from its file (the host is a larger program than the baseline: it also serves webhooks, conversions and " +
		"the cluster service, authenticates metrics scrapes and exports traces; the Go sidecar is a second program " +
		"with the Kubernetes libraries).\n")
}

// goal is one line of the goals table.
type goal struct {
	goal, variant, measured, verdict string
}

// The goals polyop sets itself (issue "Faster than in-process").
const (
	// throughputGoal is the least throughput of the declarative Go sidecar
	// against the baseline's, and imperativeThroughputGoal of the imperative
	// one, which runs the baseline's own reconciler over the Cluster service.
	throughputGoal, imperativeThroughputGoal = 1.0, 0.95
	// cpuGoal is the most CPU per reconcile, host and Go sidecar together,
	// against the baseline's.
	cpuGoal = 1.5
	// foreignHopGoal is the most a Python or TypeScript sidecar's hop may
	// take against the Go sidecar's.
	foreignHopGoal = 2.0
	// memoryGoal is the most peak RSS, host and sidecar together, against the
	// baseline's with the memory run's Widgets cached.
	memoryGoal = 1.3
)

// goVariants are the Go sidecar variants the throughput and CPU goals are
// for, with their throughput goal; foreignVariants the sidecars whose hop is
// held against the Go sidecar's over the same transport (goHopVariant).
var (
	goVariants      = map[string]float64{"go-unix": throughputGoal, "go-unary-unix": throughputGoal, "go-tcp": throughputGoal, "go-skip-unix": throughputGoal, "go-imperative-unix": imperativeThroughputGoal}
	foreignVariants = []string{"python-unix", "typescript-unix"}
)

const goHopVariant = "go-unix"

// roundsText renders a median ratio and, with several rounds, each round's.
func roundsText(ratios []float64, median float64) string {
	if len(ratios) <= 1 {
		return fmt.Sprintf("%.2f×", median)
	}
	parts := make([]string, len(ratios))
	for k, x := range ratios {
		parts[k] = fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.2f× (median of the rounds: %s)", median, strings.Join(parts, ", "))
}

// noopHop is the p50 of a run's calls to the sidecar in the no-op wave, where
// they are the hop alone, or over the whole run without a wave.
func noopHop(r *Result) float64 {
	if r.NoopWave != nil && r.NoopWave.Hop.P50 > 0 {
		return float64(r.NoopWave.Hop.P50)
	}
	return float64(r.Hop.P50)
}

// goals checks the figures against the goals polyop sets itself, each ratio
// the median of the rounds' ratios.
func (rep *Report) goals() []goal {
	var out []goal
	// The throughput, CPU and latency goals are for 2,000 Widgets, or the
	// largest size run, at every number of workers.
	goalN := 0
	for _, s := range rep.Sizes {
		if goalN == 0 || s.N == 2000 || goalN != 2000 && s.N > goalN {
			goalN = s.N
		}
	}
	for si := range rep.Sizes {
		size := &rep.Sizes[si]
		if size.N != goalN {
			continue
		}
		at := fmt.Sprintf("at %s Widgets, %s", thousands(size.N), workersText(size.Workers))
		base, bi := size.Baseline(), size.baselineIndex()
		for i, r := range size.Results {
			if r == base {
				continue
			}
			if want, ok := goVariants[r.Variant.Name]; ok {
				ratios, ratio := size.throughputRatios(i)
				out = append(out, goal{
					goal:     fmt.Sprintf("throughput ≥ %.2f× the baseline's %s", want, at),
					variant:  r.Variant.Title,
					measured: roundsText(ratios, ratio),
					verdict:  verdict(ratio >= want, "missed by "+margin(want-ratio, "")),
				})
				ratios, ratio = size.roundRatios(i, bi, func(r *Result) float64 { return float64(r.CPUPerReconcile()) })
				out = append(out, goal{
					goal:    fmt.Sprintf("CPU per reconcile, host + sidecar, ≤ %.1f× the baseline's %s", cpuGoal, at),
					variant: r.Variant.Title,
					measured: fmt.Sprintf("%s (%s = %s + %s against %s)", roundsText(ratios, ratio),
						ms(r.CPUPerReconcile()), ms(perReconcile(r.Operator.CPU, r.Reconciles)), ms(perReconcile(r.Sidecar.CPU, r.Reconciles)), ms(base.CPUPerReconcile())),
					verdict: verdict(ratio <= cpuGoal, "missed by "+margin(ratio-cpuGoal, "×")),
				})
			}
			out = append(out, latencyGoal(r, base))
		}
		if gi := size.variantIndex(goHopVariant); gi >= 0 {
			for _, name := range foreignVariants {
				i := size.variantIndex(name)
				if i < 0 {
					continue
				}
				r, g := size.Results[i], size.Results[gi]
				ratios, ratio := size.roundRatios(i, gi, noopHop)
				out = append(out, goal{
					goal:    fmt.Sprintf("hop ≤ %.0f× the Go sidecar's %s", foreignHopGoal, at),
					variant: r.Variant.Title,
					measured: fmt.Sprintf("%s (no-op sidecar call p50 %s against %s)", roundsText(ratios, ratio),
						ms(time.Duration(noopHop(r))), ms(time.Duration(noopHop(g)))),
					verdict: verdict(ratio <= foreignHopGoal, "missed by "+margin(ratio-foreignHopGoal, "×")),
				})
			}
		}
	}
	// Reads in steady state: every reconcile of the no-op wave finds
	// nothing to do, and so does every reconcile while idle.
	for _, s := range rep.Sizes {
		for _, r := range s.Results {
			if r.Variant.Baseline || r.NoopWave == nil {
				continue
			}
			reads := r.NoopWave.Requests["GET"]
			out = append(out, goal{
				goal:    fmt.Sprintf("zero reads per steady-state reconcile (%s Widgets, %s)", thousands(s.N), workersText(s.Workers)),
				variant: r.Variant.Title,
				measured: fmt.Sprintf("%.0f GETs and %.0f requests in all in %.0f no-op reconciles; %.0f reconciles while idle",
					reads, total(r.NoopWave.Requests), r.NoopWave.Reconciles, r.SteadyReconciles),
				verdict: verdict(reads == 0 && r.SteadyReconciles == 0, fmt.Sprintf("missed: %.2f reads per reconcile", reads/math.Max(1, r.NoopWave.Reconciles))),
			})
		}
	}
	if m := rep.Memory; m != nil {
		base := m.Baseline()
		for _, r := range m.Results {
			if r == base {
				continue
			}
			both, anon := r.Operator.PeakRSS+r.Sidecar.PeakRSS, r.Operator.AnonRSS+r.Sidecar.AnonRSS
			ratio := float64(both) / float64(base.Operator.PeakRSS)
			out = append(out, goal{
				goal:     fmt.Sprintf("peak RSS, host + sidecar, ≤ %.1f× the baseline's with %s Widgets cached", memoryGoal, thousands(m.N)),
				variant:  r.Variant.Title,
				measured: fmt.Sprintf("%.2f× (%s = %s + %s against %s)", ratio, mib(both), mib(r.Operator.PeakRSS), mib(r.Sidecar.PeakRSS), mib(base.Operator.PeakRSS)),
				verdict:  verdict(ratio <= memoryGoal, "missed by "+margin(ratio-memoryGoal, "×")),
			})
			if r.Operator.AnonRSS > 0 && r.Sidecar.AnonRSS > 0 && base.Operator.AnonRSS > 0 {
				// Beside the peak, the part of RSS that is heap and
				// stacks rather than the programs' files, mapped.
				g := &out[len(out)-1]
				g.measured += fmt.Sprintf("; anonymous memory at the end %.2f× (%s = %s + %s against %s)",
					float64(anon)/float64(base.Operator.AnonRSS), mib(anon), mib(r.Operator.AnonRSS), mib(r.Sidecar.AnonRSS), mib(base.Operator.AnonRSS))
			}
		}
	}
	return out
}

// latencyGoal checks the latency the hop adds at p99: the difference between
// the no-op reconciles of r and of the baseline, where the hop is most of the
// work (or, without a no-op wave, the sidecar call's p99 over the whole run,
// which the writes' contention for the API server inflates).
func latencyGoal(r, base *Result) goal {
	g := goal{goal: "no-op reconcile p99 added by the hop < 1 ms", variant: r.Variant.Title}
	added := r.Hop.P99
	g.measured = fmt.Sprintf("sidecar call p99 %s over the whole run", ms(r.Hop.P99))
	if w, bw := r.NoopWave, base.NoopWave; w != nil && bw != nil {
		added = w.Latency.P99 - bw.Latency.P99
		g.measured = fmt.Sprintf("no-op reconcile p99 %s (p50 %s); %s",
			signedMs(added), signedMs(w.Latency.P50-bw.Latency.P50), g.measured)
	}
	g.verdict = verdict(added < time.Millisecond, fmt.Sprintf("missed by %s", ms(added-time.Millisecond)))
	return g
}

// margin renders by how much a ratio misses its goal: to two decimals, or
// three when two would round it to 0.00.
func margin(x float64, unit string) string {
	if x < 0.005 {
		return fmt.Sprintf("%.3f%s", x, unit)
	}
	return fmt.Sprintf("%.2f%s", x, unit)
}

func verdict(met bool, missed string) string {
	if met {
		return "met"
	}
	return "**" + missed + "**"
}

// withRatio renders value, followed for a variant other than the baseline by
// its ratio to the baseline's.
func withRatio(value string, v, base float64, isBase bool) string {
	if isBase || base == 0 || math.IsNaN(v) || math.IsNaN(base) {
		return value
	}
	return fmt.Sprintf("%s (%.2f×)", value, v/base)
}

func seconds(d time.Duration) string {
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v == 0:
		return "0 ms"
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	default:
		return fmt.Sprintf("%.0f ms", v)
	}
}

func signedMs(d time.Duration) string {
	if d < 0 {
		return "−" + ms(-d)
	}
	return "+" + ms(d)
}

func mib(n int64) string {
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

// thousands renders n with a comma between thousands, as 10,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// machine describes this machine: CPU model, cores, memory, kernel and Go.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.Join(strings.Fields(v), " ")
				break
			}
		}
	}
	memory := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			var kb int64
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
				memory = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
				break
			}
		}
	}
	kernel := runtime.GOOS
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = "Linux " + strings.TrimSpace(string(data))
	}
	return fmt.Sprintf("%d × %s%s, %s, %s", runtime.NumCPU(), model, memory, kernel, runtime.Version())
}
