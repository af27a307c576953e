// Package sidecartest calls the reconcilers of a sidecar.Server without a
// host, for unit tests.
//
// A Harness builds the request the host would send (the object as JSON, with
// its apiVersion and kind), passes it and the response through the protobuf
// wire encoding, and calls the Server's Reconcile in process: the code path is
// the one a real host exercises, minus the network.
//
//	srv, _ := sidecar.New(sidecar.Options{Name: "test", Scheme: scheme})
//	_ = (&controller.Reconciler{}).SetupWithServer(srv)
//	h := sidecartest.New(t, srv)
//
//	res := h.Reconcile(t.Context(), "maintenancewindow", window)
//	if res.Err != nil {
//		t.Fatalf("reconcile failed: %s", res.Err.Message)
//	}
//	var got v1.MaintenanceWindow
//	res.Status(&got) // the object with the status the host would write
//
// Webhooks and conversions are called the same way:
//
//	res := h.ValidateCreate(t.Context(), window)  // also Default, ValidateUpdate, ValidateDelete
//	if res.Allowed { … }                           // else res.Denial.Message, res.Denial.FieldErrors
//	res.Warnings
//
// An admission call takes what the host's request can carry besides the
// objects: DryRun(), Subresource("status") and AsUser("alice", "admins"),
// which the webhook reads with admission.RequestFromContext(ctx):
//
//	res = h.ValidateUpdate(t.Context(), old, window, sidecartest.Subresource("status"), sidecartest.DryRun())
//
//	var beta v1beta1.MaintenanceWindow
//	err := h.Convert(t.Context(), window, &beta)   // to the version of beta's type
//
// A reconcile's Err says how the host would retry it: Terminal for a
// sidecar.TerminalError, RetryAfter for a sidecar.TemporaryError.
//
// The Harness fails the test (t.Fatal) on anything the host would treat as a
// broken sidecar, such as a gRPC error; Harness.Call, CallDefault,
// CallValidate and CallConvert return those instead.
package sidecartest
