// Package description is the host's model of what a sidecar declares: the
// validated form of its DescribeResponse (NewDescription, Description), and
// that description resolved against the API server (Resolve, Resolved), which
// the rest of the host builds its controllers, webhooks, conversions, cache,
// cluster service and printed manifests from.
//
// Validation reports every problem of a description at once, each with the
// path of the offending field. Resolution looks every kind the sidecar names up
// once, through a RESTMapper, and derives from it everything that depends on
// the kind's resource or scope.
package description
