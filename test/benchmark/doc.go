// Package benchmark is polyop's end-to-end benchmark harness, a tool of the
// repository rather than part of polyop: the host and its sidecars
// reconciling real objects on a real API server, side by side with an
// in-process controller-runtime operator doing the same work, every figure
// reported as a ratio to that baseline. `make bench` runs it through
// hack/bench; TestSmoke runs it small in `make test`.
//
// The workload is the Widget kind (api/v1alpha1, CRD in config/crd): each
// Widget is reconciled into an owned ConfigMap holding its data, plus a
// status with a Ready condition. The logic is package widget's. It runs as
// the variants Variants lists, each as real processes so that CPU time and
// memory come from /proc:
//
//   - in-process: the baseline, an ordinary controller-runtime operator
//     (inprocess) with the host's cache settings and the same writes;
//   - go-unix and go-tcp: the host (cmd/host) with the Go sidecar
//     (gosidecar, declarative: the ConfigMap is its desired child) over a
//     unix socket or TCP loopback;
//   - go-unary-unix: go-unix with the host's --sidecar-streams=false, its
//     Reconcile calls unary instead of on a stream per worker;
//   - go-imperative-unix: the host with gosidecar --imperative, the baseline's own
//     reconciler (widget.Reconciler) run unchanged over the Go SDK's client;
//   - python-unix and typescript-unix: the host with the sidecars of
//     sidecars/python and sidecars/typescript, built on those SDKs, when
//     their runtimes are installed.
//
// Every size runs at each number of workers of Options.Workers (1 and 5 by
// default), the controller's max concurrent reconciles in every variant.
//
// A run (one variant, N Widgets, some workers) starts the processes against a fresh
// control plane (or a fresh namespace of a shared one), waits for the
// controller's workers, creates the Widgets and watches them until all are
// ready, waits for the reconciles to stop, stays idle to show that nothing
// reconciles without cause, then touches every ConfigMap once (the no-op
// wave) to measure reconciles that have nothing to do. Reconcile counts,
// latencies and API requests come from each process's Prometheus metrics
// (scraped in the protobuf format, for the native histograms), CPU and
// memory from /proc/<pid>/stat and /proc/<pid>/status.
//
// The sharding runs (Options.ShardingReplicas; see ShardingReport) run the
// host with --sharding=labels in 1, 2 and 3 replicas by default, each with its
// own Go sidecar, at Options.ShardingObjects Widgets, against the unsharded
// host (go-unix) at the same size. Each replica is measured as a run's host
// and sidecar are, its share from its polyop_shard_owned_objects. After the
// run with the fewest replicas, replicas are started one at a time up to the
// most, and then one that does not lead is killed (SIGKILL); each ring change
// is timed until every Widget and its ConfigMap carry the shard label of the
// Widget's ring owner, which the harness follows through a metadata cache of
// its own.
//
// Run returns a Report; Report.Markdown renders it for BENCHMARKS.md. The
// runner is run.go (a run's phases), sharding.go, variant.go and the
// measuring files (metrics.go, proc.go, measure.go, tracker.go); the report
// is result.go (what a run measured), report.go and sharding_report.go (the
// tables and goals).
package benchmark
