// Package index evaluates the cache indexes a sidecar declares
// (IndexDescription): a field path or a CEL expression over an object, giving
// the values the host's cache indexes the object under, so that a List with
// the field selector "<name>=<value>" is answered from the cache, as
// controller-runtime's FieldIndexer.IndexField answers it for a Go function.
//
// An expression is compiled once, at start; Compile refuses one that does not
// compile. Evaluating it never panics: an error for one object is returned to
// the caller, which logs it and indexes the object under no value.
package index
