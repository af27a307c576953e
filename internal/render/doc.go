// Package render runs a sidecar's logic on one object with no cluster and no
// host, and returns what the sidecar answered: polyop render, for tests and
// debugging, as crossplane render is for Crossplane functions.
//
// Render reads the object (and, optionally, its observed children, other
// objects and the object as it was) from YAML files, starts the sidecar
// command (see package sidecarprocess) or dials a running sidecar, asks it to
// describe itself and calls it as the host would: admission first when asked
// (Default, then Validate), then Reconcile with the object as the API server
// would hold it. Its answer is checked as the host checks it and returned as
// a RenderResult, printed as YAML or JSON.
//
// A sidecar that reads and writes through the Cluster service gets one in
// memory: reads are served from the given objects (and the sidecar's
// declared indexes), writes are recorded, not applied, and returned as
// RenderResult's Writes.
//
// ReadObjects reads the objects of a YAML file as render does; polyop run
// reads the project's manifests with it.
package render
