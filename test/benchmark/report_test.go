package benchmark

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

var (
	baselineVariant = Variant{Name: "in-process", Title: "baseline", Baseline: true}
	unixVariant     = Variant{Name: "go-unix", Title: "go over unix", Transport: Unix}
)

// result builds a run of n Widgets that converged in d.
func result(v Variant, n int, d time.Duration) *Result {
	return &Result{
		Variant: v, N: n, Convergence: d, Settled: d, Reconciles: float64(2 * n), ReconcilesAtReady: float64(2 * n),
		Requests: map[string]float64{"PATCH": float64(2 * n)},
		Latency:  Quantiles{P50: time.Millisecond, P99: 10 * time.Millisecond},
		Operator: ProcessResult{CPU: time.Second, PeakRSS: 100 << 20, RSS: 90 << 20},
		NoopWave: &WaveResult{Touched: n, Reconciles: float64(n), Latency: Quantiles{P50: 100 * time.Microsecond, P99: time.Millisecond}},
	}
}

func TestMedianRuns(t *testing.T) {
	t.Parallel()
	rounds := [][]*Result{
		{result(baselineVariant, 100, 10*time.Second), result(unixVariant, 100, 30*time.Second)},
		{result(baselineVariant, 100, 12*time.Second), result(unixVariant, 100, 11*time.Second)},
		{result(baselineVariant, 100, 11*time.Second), result(unixVariant, 100, 12*time.Second)},
	}
	got := medianRuns(rounds)
	if got[0] != rounds[2][0] || got[1] != rounds[2][1] {
		t.Errorf("medianRuns picked runs converging in %s and %s, want 11s and 12s", got[0].Convergence, got[1].Convergence)
	}
	s := SizeReport{N: 100, Results: got, Rounds: rounds}
	ratios, median := s.throughputRatios(1)
	if len(ratios) != 3 || median < 0.91 || median > 0.92 { // 11/12
		t.Errorf("throughputRatios = %v, median %v; want 3 ratios, median 11/12", ratios, median)
	}
}

func TestWithoutFailed(t *testing.T) {
	t.Parallel()
	a, b := result(baselineVariant, 1, time.Second), result(unixVariant, 1, time.Second)
	got := withoutFailed([][]*Result{{a, b}, {a, nil}}, []error{nil, errProcessExited})
	if len(got) != 2 || len(got[0]) != 1 || len(got[1]) != 1 || got[0][0] != a {
		t.Errorf("withoutFailed kept %v, want the baseline alone in each round", got)
	}
}

func TestGoals(t *testing.T) {
	t.Parallel()
	base := result(baselineVariant, 2000, 10*time.Second)
	for name, tc := range map[string]struct {
		sidecar *Result
		want    []string
	}{
		"if the sidecar is as fast as the baseline and its hop cheap, then every goal is met": {
			sidecar: result(unixVariant, 2000, 10*time.Second),
			want:    []string{"| 1.00× | met |", "| met |"},
		},
		"if the sidecar is slower, then the throughput goal says by how much it is missed": {
			sidecar: result(unixVariant, 2000, 20*time.Second),
			want:    []string{"0.50×", "**missed by 0.50**"},
		},
		"if a steady-state reconcile reads, then the reads goal is missed": {
			sidecar: func() *Result {
				r := result(unixVariant, 2000, 10*time.Second)
				r.NoopWave.Requests = map[string]float64{"GET": 2000}
				return r
			}(),
			want: []string{"2000 GETs", "**missed: 1.00 reads per reconcile**"},
		},
		"if host and sidecar use more than 1.5× the baseline's CPU, then the CPU goal says by how much": {
			sidecar: func() *Result {
				r := result(unixVariant, 2000, 10*time.Second)
				r.Sidecar.CPU = 800 * time.Millisecond // 1.8 s against 1 s
				return r
			}(),
			want: []string{"CPU per reconcile, host + sidecar, ≤ 1.5×", "| 1.80× (0.45 ms = 0.25 ms + 0.20 ms against 0.25 ms) | **missed by 0.30×** |"},
		},
		"if host and sidecar use a hair more than 1.5× the baseline's CPU, then the miss shows in three decimals": {
			sidecar: func() *Result {
				r := result(unixVariant, 2000, 10*time.Second)
				r.Sidecar.CPU = 502 * time.Millisecond // 1.502 s against 1 s
				return r
			}(),
			want: []string{"**missed by 0.002×**"},
		},
		"if the imperative sidecar reaches 0.96× the baseline, then its throughput goal (0.95×) is met": {
			sidecar: result(Variant{Name: "go-imperative-unix", Title: "imperative", Transport: Unix}, 2000, 10416*time.Millisecond),
			want:    []string{"throughput ≥ 0.95× the baseline's at 2,000 Widgets, 1 worker | imperative | 0.96× | met |"},
		},
		"if the hop adds milliseconds, then the latency goal is missed": {
			sidecar: func() *Result {
				r := result(unixVariant, 2000, 10*time.Second)
				r.NoopWave.Latency.P99 = 4 * time.Millisecond
				r.Hop.P99 = 2 * time.Millisecond
				return r
			}(),
			want: []string{"no-op reconcile p99 +3.00 ms", "**missed by 2.00 ms**"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rep := &Report{
				Options: Options{}.withDefaults(),
				Sizes:   []SizeReport{{N: 2000, Workers: 1, Results: []*Result{base, tc.sidecar}, Rounds: [][]*Result{{base, tc.sidecar}}}},
			}
			md := rep.Markdown()
			i := strings.Index(md, "#### Goals")
			if i < 0 {
				t.Fatalf("the report has no goals:\n%s", md)
			}
			goals := md[i:]
			for _, want := range tc.want {
				if !strings.Contains(goals, want) {
					t.Errorf("the goals lack %q:\n%s", want, goals)
				}
			}
		})
	}
}

func TestReportSurvivesJSON(t *testing.T) {
	t.Parallel()
	base, sc := result(baselineVariant, 500, 5*time.Second), result(unixVariant, 500, 6*time.Second)
	rep := &Report{
		Options:    Options{MemoryObjects: 10000}.withDefaults(),
		Sizes:      []SizeReport{{N: 500, Workers: 1, Results: []*Result{base, sc}, Rounds: [][]*Result{{base, sc}}}},
		Memory:     &SizeReport{N: 10000, Results: []*Result{base, sc}, Rounds: [][]*Result{{base, sc}}},
		Skipped:    []Skipped{{Variant: Variant{Title: "host + Python sidecar"}, Reason: "no Python"}},
		Footprints: []Footprint{{Kind: "Widget", JSON: 1000, Typed: 2000, Object: 2200, Unstructured: 4000}},
		Sharding:   shardingReport(),
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	back := &Report{}
	if err := json.Unmarshal(data, back); err != nil {
		t.Fatal(err)
	}
	if got, want := back.Markdown(), rep.Markdown(); got != want {
		t.Errorf("the report rendered from JSON differs:\n%s\nwant\n%s", got, want)
	}
	for _, want := range []string{"#### 500 Widgets, 1 worker", "#### Memory with 10,000 Widgets cached", "(1.20×)", "host + Python sidecar: no Python", "| Widget | 1000 B | 2000 B | 2200 B (1.10×) | 4000 B (2.00×) |", "#### Sharding: 1,000 Widgets"} {
		if !strings.Contains(rep.Markdown(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// TestCPUPerReconcile checks the cost table's CPU per reconcile: host +
// sidecar for a sidecar variant, the host's alone beside it, the no-op
// wave's, each against the baseline's of the same size and workers, and one
// section and goals per number of workers.
func TestCPUPerReconcile(t *testing.T) {
	t.Parallel()
	base, sc := result(baselineVariant, 2000, 10*time.Second), result(unixVariant, 2000, 10*time.Second)
	// 4,000 reconciles each: the baseline 1 s, the host 1 s and the sidecar 0.5 s.
	sc.Sidecar.CPU = 500 * time.Millisecond
	base.NoopWave.OperatorCPU = 200 * time.Millisecond
	sc.NoopWave.OperatorCPU, sc.NoopWave.SidecarCPU = 200*time.Millisecond, 100*time.Millisecond
	base5, sc5 := result(baselineVariant, 2000, 5*time.Second), result(unixVariant, 2000, 10*time.Second)
	rep := &Report{
		Options: Options{Workers: []int{1, 5}}.withDefaults(),
		Sizes: []SizeReport{
			{N: 2000, Workers: 1, Results: []*Result{base, sc}, Rounds: [][]*Result{{base, sc}}},
			{N: 2000, Workers: 5, Results: []*Result{base5, sc5}, Rounds: [][]*Result{{base5, sc5}}},
		},
	}
	md := rep.Markdown()
	for _, want := range []string{
		"with 1 and 5 worker(s)",
		"#### 2,000 Widgets, 1 worker\n",
		"#### 2,000 Widgets, 5 workers\n",
		"| go over unix | 0.38 ms = 0.25 ms + 0.12 ms (1.50×) | 0.25 ms (1.00×) | 0.15 ms (1.50×) |",
		"| baseline | 0.25 ms | — | 0.10 ms |",
		"at 2,000 Widgets, 1 worker | go over unix | 1.00×",
		"at 2,000 Widgets, 5 workers | go over unix | 0.50×",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// TestForeignHopAndMemoryGoals checks the goals a Python or TypeScript
// sidecar is held to (its no-op hop against the Go sidecar's of the same
// run) and the memory goal (host and sidecar together against the baseline).
func TestForeignHopAndMemoryGoals(t *testing.T) {
	t.Parallel()
	base, goRun := result(baselineVariant, 2000, 10*time.Second), result(unixVariant, 2000, 10*time.Second)
	py := result(Variant{Name: "python-unix", Title: "python", Transport: Unix}, 2000, 10*time.Second)
	ts := result(Variant{Name: "typescript-unix", Title: "typescript", Transport: Unix}, 2000, 10*time.Second)
	goRun.NoopWave.Hop.P50 = 400 * time.Microsecond
	py.NoopWave.Hop.P50 = 700 * time.Microsecond
	ts.NoopWave.Hop.P50 = 1200 * time.Microsecond
	goMem, pyMem := result(unixVariant, 10000, time.Minute), result(Variant{Name: "python-unix", Title: "python", Transport: Unix}, 10000, time.Minute)
	goMem.Sidecar.PeakRSS = 20 << 20 // 120 MiB against 100 MiB
	pyMem.Sidecar.PeakRSS = 40 << 20 // 140 MiB
	baseMem := result(baselineVariant, 10000, time.Minute)
	baseMem.Operator.AnonRSS, goMem.Operator.AnonRSS, goMem.Sidecar.AnonRSS = 80<<20, 84<<20, 8<<20
	rep := &Report{
		Options: Options{}.withDefaults(),
		Sizes: []SizeReport{{N: 2000, Workers: 1, Results: []*Result{base, goRun, py, ts},
			Rounds: [][]*Result{{base, goRun, py, ts}}}},
		Memory: &SizeReport{N: 10000, Results: []*Result{baseMem, goMem, pyMem}, Rounds: [][]*Result{{baseMem, goMem, pyMem}}},
	}
	md := rep.Markdown()
	for _, want := range []string{
		"| hop ≤ 2× the Go sidecar's at 2,000 Widgets, 1 worker | python | 1.75× (no-op sidecar call p50 0.70 ms against 0.40 ms) | met |",
		"| hop ≤ 2× the Go sidecar's at 2,000 Widgets, 1 worker | typescript | 3.00× (no-op sidecar call p50 1.20 ms against 0.40 ms) | **missed by 1.00×** |",
		"| peak RSS, host + sidecar, ≤ 1.3× the baseline's with 10,000 Widgets cached | go over unix | 1.20× (120 MiB = 100 MiB + 20 MiB against 100 MiB); anonymous memory at the end 1.15× (92 MiB = 84 MiB + 8 MiB against 80 MiB) | met |",
		"| 20 MiB | 8 MiB |",
		"| python | 1.40× (140 MiB = 100 MiB + 40 MiB against 100 MiB) | **missed by 0.10×** |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the goals lack %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "throughput ≥ 1.00× the baseline's at 2,000 Widgets, 1 worker | python") {
		t.Errorf("a Python sidecar is held to the Go sidecar's throughput goal:\n%s", md)
	}
}
