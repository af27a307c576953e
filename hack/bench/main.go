// Command bench runs polyop's end-to-end benchmark (package
// test/benchmark) and prints its report, a markdown section for
// BENCHMARKS.md. `make bench` runs it.
//
// Usage:
//
//	bench [-sizes 500,2000] [-workers 1,5] [-memory-objects 10000] [-variants in-process,go-unix]
//	      [-sharding-replicas 1,2,3] [-sharding-objects 10000] [-shard-lease-duration 15s] [-update] [flags]
//
// The sharding runs (-sharding-replicas; empty skips them) run the host
// with --sharding=labels in each number of replicas, each replica with its
// own Go sidecar, at -sharding-objects Widgets, against the unsharded host,
// then time the ring changes: replicas started one at a time up to the
// most, then one killed.
//
// With -update it also replaces the generated section of BENCHMARKS.md with
// the report.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/polyop/polyop/internal/testenv"
	"github.com/polyop/polyop/test/benchmark"
)

func main() {
	if err := run(); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		opts     benchmark.Options
		sizes    = "500,2000"
		variants string
		memVars  string
		update   bool
		out      string
		command  string
	)
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&sizes, "sizes", sizes, "Comma-separated numbers of Widgets: one run of every variant each.")
	fs.IntVar(&opts.Rounds, "rounds", 3, "How many times every variant runs at every size (the median run is shown).")
	fs.IntVar(&opts.MemoryObjects, "memory-objects", 10000, "Widgets of the memory run (host against baseline memory); 0 skips it.")
	fs.StringVar(&variants, "variants", "", "Comma-separated variants to run (default: every one that can run here). Known: "+variantNames()+".")
	shardingReplicas := "1,2,3"
	fs.StringVar(&shardingReplicas, "sharding-replicas", shardingReplicas, "Comma-separated numbers of host replicas of the sharding runs (--sharding=labels, a Go sidecar each), one run each; the ring changes follow the run with the fewest. Empty skips them.")
	fs.IntVar(&opts.ShardingObjects, "sharding-objects", 10000, "Widgets of the sharding runs.")
	fs.DurationVar(&opts.ShardLeaseDuration, "shard-lease-duration", 15*time.Second, "The replicas' --shard-lease-duration: how long a killed replica keeps its share.")
	fs.StringVar(&memVars, "memory-variants", "", "Comma-separated variants of the memory run (default: in-process,go-unix).")
	fs.DurationVar(&opts.Steady, "steady", 10*time.Second, "How long each run stays idle once its reconciles have stopped.")
	fs.BoolVar(&opts.SkipNoopWave, "skip-noop-wave", false, "Skip the wave that reconciles every Widget once more with nothing to change.")
	workers := "1,5"
	fs.StringVar(&workers, "workers", workers, "Comma-separated numbers of workers of the Widget controller (its max concurrent reconciles, in every variant): one run of every variant at every size each.")
	fs.IntVar(&opts.Creators, "creators", 8, "How many Widgets the harness creates at once.")
	fs.BoolVar(&opts.SharedControlPlane, "shared-control-plane", false, "Run every run on one control plane (a namespace each) instead of a fresh one per run.")
	fs.StringVar(&opts.ProfileDir, "profile-dir", "", "Write CPU and heap profiles of the host, the baseline and the Go sidecar here.")
	fs.IntVar(&opts.ProfileSeconds, "profile-seconds", 10, "The length of the CPU profiles, from each run's first create.")
	var hostArgs, env, sidecarEnv string
	fs.StringVar(&env, "env", "", "Space-separated NAME=value pairs added to the environment of every process of every variant, for experiments.")
	fs.StringVar(&sidecarEnv, "sidecar-env", "", "Space-separated NAME=value pairs added to the sidecars' environment, for experiments.")
	fs.StringVar(&hostArgs, "host-args", "", "Space-separated flags added to the host's command line, for experiments.")
	fs.StringVar(&opts.LogDir, "log-dir", "", "Write the output of every process here.")
	fs.BoolVar(&update, "update", false, "Also replace the generated section of BENCHMARKS.md with the report.")
	fs.StringVar(&out, "out", "", "Also write the report to this file.")
	fs.StringVar(&command, "command", "make bench", "The command named in the report's first line.")
	var jsonOut, render string
	fs.StringVar(&jsonOut, "json", "", "Also write the measurements to this file, as JSON.")
	fs.StringVar(&render, "render", "", "Run nothing: render the report from measurements a -json run wrote.")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	var err error
	if opts.Sizes, err = parseCounts("-sizes", sizes); err != nil {
		return err
	}
	if opts.Workers, err = parseCounts("-workers", workers); err != nil {
		return err
	}
	if opts.ShardingReplicas, err = parseCounts("-sharding-replicas", shardingReplicas); err != nil {
		return err
	}
	opts.HostArgs = strings.Fields(hostArgs)
	opts.Env = strings.Fields(env)
	opts.SidecarEnv = strings.Fields(sidecarEnv)
	opts.Variants = split(variants)
	opts.MemoryVariants = split(memVars)
	opts.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	// The harness reports through Logf; the libraries' logs are noise here.
	ctrllog.SetLogger(logr.Discard())

	var report *benchmark.Report
	if render != "" {
		data, err := os.ReadFile(render)
		if err != nil {
			return err
		}
		report = &benchmark.Report{}
		if err := json.Unmarshal(data, report); err != nil {
			return fmt.Errorf("%s: %w", render, err)
		}
	} else {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if report, err = benchmark.Run(ctx, opts); err != nil {
			if report != nil && (len(report.Sizes) > 0 || report.Sharding != nil) {
				fmt.Println("The runs that completed before the failure:")
				fmt.Println(report.Markdown())
			}
			return err
		}
		if jsonOut != "" {
			data, err := json.MarshalIndent(report, "", "  ")
			if err != nil {
				return err
			}
			if err := os.WriteFile(jsonOut, data, 0o644); err != nil {
				return err
			}
		}
	}
	report.Command = command
	md := report.Markdown()
	fmt.Println(md)
	if out != "" {
		if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
			return err
		}
	}
	if update {
		path := filepath.Join(testenv.RepoRoot(), "BENCHMARKS.md")
		if err := updateSection(path, md); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "updated", path)
	}
	return nil
}

// updateSection replaces what lies between the markers in the file at path
// with md.
func updateSection(path, md string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(data)
	begin := strings.Index(text, benchmark.BeginMarker)
	end := strings.Index(text, benchmark.EndMarker)
	if begin < 0 || end < begin {
		return fmt.Errorf("%s has no generated section: add the lines\n%s\n%s", path, benchmark.BeginMarker, benchmark.EndMarker)
	}
	text = text[:begin+len(benchmark.BeginMarker)] + "\n" + md + text[end:]
	return os.WriteFile(path, []byte(text), 0o644)
}

// parseCounts parses the comma-separated positive numbers of the flag name.
func parseCounts(name, s string) ([]int, error) {
	var out []int
	for _, part := range split(s) {
		n, err := strconv.Atoi(strings.ReplaceAll(part, "_", ""))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive number", name, part)
		}
		out = append(out, n)
	}
	return out, nil
}

func split(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func variantNames() string {
	var names []string
	for _, v := range benchmark.Variants() {
		names = append(names, v.Name)
	}
	return strings.Join(names, ", ")
}
