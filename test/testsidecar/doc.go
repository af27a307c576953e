// Command testsidecar is the polyop sidecar of the host's end-to-end and
// conformance tests, in one binary with several modes, each the first
// argument:
//
//	testsidecar [flags]            MaintenanceWindows, below
//	testsidecar children [flags]   Widgets with children, watches, finalizers and
//	                               the Cluster service, on the generated gRPC code
//	                               alone (package children)
//	testsidecar index [flags]      declared cache indexes and cached kinds (package index)
//	testsidecar trace [flags]      tracing through the SDK (package trace)
//	testsidecar finalize [flags]   the conformance tests of finalizers (package finalize)
//
// Without a mode, it is built with the Go SDK and reconciles MaintenanceWindow
// objects (examples.polyop.dev/v1), but its behaviour is driven by flags and by
// annotations on each object, so that a test can make it fail, requeue, stall
// or misdescribe itself on purpose.
//
// Annotations, read on every reconcile:
//
//	e2e.polyop.dev/fail-times: "N"        fail transiently ("injected failure") while the
//	                                       request's retry count is below N, so that
//	                                       attempt N+1 succeeds
//	e2e.polyop.dev/terminal: "message"    fail with a terminal error with that message
//	e2e.polyop.dev/requeue-after: "500ms" ask to be reconciled again after that long
//	e2e.polyop.dev/delay: "10s"           sleep that long first (after --delay), to
//	                                       outlast the host's --reconcile-timeout
//
// Otherwise (and also with requeue-after) a reconcile sets status.phase to
// "Reconciled", status.observedGeneration to the generation and the Ready
// condition to True, and records one Normal "Reconciled" event when the
// observed generation changes. An annotation whose value does not parse is a
// terminal error naming it.
//
// Flags shape what the sidecar declares and how it behaves:
//
//	--address                     where to serve (default unix:///var/run/polyop/sidecar.sock)
//	--name                        the sidecar's name (default testsidecar)
//	--controller-name             the controller's name (default maintenancewindow)
//	--protocol-version            the protocol version Describe answers (a ProtocolVersion name
//	                              or number), to test a mismatch
//	--kind-override               the kind Describe declares, as group/version/Kind, to test
//	                              a kind the API server does not serve
//	--update-filters              comma-separated: generation, labels, annotations, deletion
//	--label-selector              the controller's label selector
//	--namespaces                  comma-separated namespaces the controller declares
//	--max-concurrent-reconciles   the controller's concurrency (0: the host's default, 1)
//	--delay                       how long each reconcile sleeps first, to test a slow sidecar
//	--log-file                    append one JSON line per reconcile call to this file
//	--overlap-dir                 a directory shared by several sidecars: each reconcile holds a
//	                              lock file per object there, and one that finds it held appends
//	                              a line to overlaps.log
//	--instance                    which of several sidecars this is: in each call log line and in
//	                              the Ready condition's message ("Reconciled by INSTANCE")
//	--child-configmap             own ConfigMaps: each reconcile desires one named after the window
//	--webhooks                    also declare a defaulter and a validator of MaintenanceWindow
//	                              (create, update, delete; see admission.go for the annotations
//	                              that drive them)
//	--webhook-failure-policy      fail or ignore
//	--webhook-timeout-seconds     the webhooks' timeout (0: 10)
//	--admission-log-file          append one JSON line per admission call to this file
//	--max-message-size            the largest gRPC message
//	--zap-*                       controller-runtime's logging flags
//
// Each line of --log-file is written, and flushed, when a call arrives:
//
//	{"time":"2026-03-10T12:00:00.123456789Z","namespace":"default","name":"w","exists":true,
//	 "generation":2,"resourceVersion":"1234","retries":0}
//
// (with "instance" too, when --instance is set).
//
// exists is false, and generation and resourceVersion are empty, when the host
// reports that the object is gone.
package main
