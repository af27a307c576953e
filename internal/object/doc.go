// Package object holds Object, the form in which the host caches the objects
// of every kind it watches: the object's metadata decoded into
// metav1.ObjectMeta, and everything else (spec, status, data, …) kept as the
// JSON the API server sent.
//
// The host knows no Go type for the kinds a sidecar declares. Decoded into
// unstructured.Unstructured (a map[string]any per JSON object), a cached
// object takes about twice the memory its Go type would; an Object takes
// about what the Go type does. It also hands the sidecar the object's JSON
// without decoding and encoding it again, and it satisfies client.Object, so
// controller-runtime's cache, client, handlers and predicates work with it as
// with any typed object.
//
// AddToScheme registers Object (and List) for the kinds the host caches; the
// cache must then be told to set each object's kind (Transform), because the
// API machinery's decoders leave it empty.
package object
