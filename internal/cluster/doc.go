// Package cluster serves polyop.v1alpha1.ClusterService: the sidecar's way to
// read and write the cluster through its host, with the host's credentials,
// as far as its description grants.
//
// Reads of the kinds the host already caches (the kinds its controllers
// reconcile, own or watch, in the namespaces it watches them) are served from
// the host's informer cache and cost no API request; reads of any other kind,
// or of namespaces the cache does not hold (a List across every namespace of a
// kind cached in some), reads that ask for it (ReadOptions.uncached), and reads that
// continue a paginated List go to the API server. Every read says where it was served from. The server never
// starts an informer for a kind the host does not already cache: an informer
// per kind a sidecar happens to read would grow the host's memory without
// bound and without anyone having asked for it.
//
// Every request names its object by kind and key, Create and Update too: the
// object they carry gets its apiVersion, kind, namespace and name from them
// where it has none, and is refused (INVALID_ARGUMENT, naming both values)
// where it says otherwise; a subresource create names the object the
// subresource belongs to. Writes (create, update, patch in every patch type,
// delete, on the object or a subresource, with dry run; force for a
// server-side apply only) go to the API server through a dynamic client.
// Events are recorded through the manager's event recorder.
//
// The service serves what the sidecar's description grants
// (description.Resolved.Grants, the definition the host's RBAC is rendered
// from too), whatever the host's own credentials: writes only of the kinds the
// description reconciles, owns, watches or caches, and reads of Secrets only
// where it declares them. Anything else is PERMISSION_DENIED with an APIError
// of reason Forbidden that names the kind, the verb and how to declare it.
//
// Errors keep their Kubernetes meaning across the wire: an error the API server
// returned becomes a gRPC status whose code follows the HTTP status (see
// Code) and whose APIError detail carries the API server's metav1.Status as
// JSON, causes included. Errors that did not come from the API server carry no
// APIError detail: a malformed request is INVALID_ARGUMENT, and a kind the API
// server does not serve is NOT_FOUND. The detail travels as gRPC carries any:
// an Any in the google.rpc.Status of the grpc-status-details-bin trailer.
//
// Every request is logged at V(1), naming the method, the kind, the object and
// where a read was served from.
package cluster
