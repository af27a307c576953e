// Package children is the children mode of testsidecar (testsidecar
// children): a polyop sidecar that exists for the host's
// end-to-end tests of owned children, watches, finalizers and the cluster
// service. It is written on the generated polyop.v1alpha1 gRPC code alone, as a
// sidecar in a language without an SDK would be, and reconciles Widget objects
// (e2e.polyop.dev/v1, test/e2e/testdata/crd).
//
// It declares one controller, "widget" (--controller-name), which
//
//   - owns ConfigMaps, sent back as observed children (adopted when
//     --adopt-configmaps is set), and Secrets, not sent; with --own-jobs it
//     owns batch/v1 Jobs too, and with --replace-jobs it declares
//     replace_on_immutable for them;
//   - watches ConfigMaps by the field path spec.configMapName, ConfigMaps by
//     the annotation e2e.polyop.dev/widget, and ServiceAccounts by the label
//     e2e.polyop.dev/widget;
//   - declares the finalizer e2e.polyop.dev/cleanup (--finalizer, "" for none).
//
// A Widget's spec drives each reconcile:
//
//	configMaps: [a, b]        desired ConfigMaps a and b, with data.value = spec.value
//	secrets: [s]              desired Secrets, with data.value = base64(spec.value)
//	jobs: [j]                 desired Jobs (with --own-jobs), whose one container
//	                          runs image spec.jobImage
//	value: "v"                the value the children carry
//	partial: true             the desired set is not complete (nothing is pruned)
//	fail: "message"           answer with a transient error (and the children)
//	failRetryAfter: "2s"      with fail, the error's retry_after
//	badChild: "how"           add one malformed child: not-json, wrong-kind,
//	                          no-name or other-namespace
//	configMapName: "c"        read ConfigMap c through the cluster service and put
//	                          its data.value and where it was read from in status
//	requeueAfter: "1s"        ask to be reconciled again after that long (ignored
//	                          beside fail)
//
// The status it answers is {phase: Ready, observedGeneration, configMaps:
// [observed ConfigMap children], configMapValue, configMapSource}.
//
// Finalize follows the Widget's annotations: e2e.polyop.dev/finalize "fail"
// fails (the host retries with backoff), "wait" asks to be called again after
// 200ms, anything else succeeds; before succeeding, it deletes the ConfigMap
// named by e2e.polyop.dev/cleanup-configmap through the cluster service.
//
// Every call is appended, as one JSON line, to --log-file:
//
//	{"time":"…","method":"Reconcile","namespace":"ns","name":"w","exists":true,
//	 "generation":1,"resourceVersion":"123","retries":0,"children":["ConfigMap/a"],
//	 "finalizers":["e2e.polyop.dev/cleanup"]}
package children
