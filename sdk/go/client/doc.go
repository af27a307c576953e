// Package client is a controller-runtime client.Client backed by the polyop
// host's Cluster service (polyop.v1alpha1.ClusterService), so that a
// reconciler written for controller-runtime runs in a sidecar nearly
// unchanged.
//
// The host serves the Cluster service to its sidecar: reads come from the
// host's informer cache for the kinds it watches, and from the API server
// otherwise; writes go through the host's client, with the host's
// credentials. A sidecar learns the address from the host's DescribeRequest
// (sidecar.Server.GetClient does that for you) or from the
// POLYOP_CLUSTER_ADDRESS environment variable:
//
//	c, err := client.New(client.Options{Scheme: scheme}) // dials $POLYOP_CLUSTER_ADDRESS
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	var d appsv1.Deployment
//	err = c.Get(ctx, ctrlclient.ObjectKey{Namespace: "default", Name: "web"}, &d)
//	if apierrors.IsNotFound(err) {
//		...
//	}
//
// A relative unix address is dialed at its absolute path, against the working
// directory. A host serving the Cluster service on the network requires mutual
// TLS (its --cluster-tls-* flags): the Client dials with TLS when Options.TLS
// is set (see TLSConfig), or when POLYOP_CLUSTER_TLS_CA_FILE names the CA of
// the host's certificate, presenting the client certificate of
// POLYOP_CLUSTER_TLS_CERT_FILE and POLYOP_CLUSTER_TLS_KEY_FILE. A write outside
// the namespaces the host watches is refused: apierrors.IsForbidden.
//
// Objects cross the wire as the API server's JSON. Typed objects are encoded
// with their apiVersion and kind from the scheme and decoded into the Go type
// the caller passes, *unstructured.Unstructured and
// *metav1.PartialObjectMetadata included. Objects read or written come back
// with apiVersion and kind set, as controller-runtime's cache reader returns
// them.
//
// Errors from the API server keep their type: the host sends the API server's
// metav1.Status with every such error, and the Client returns it as an
// *apierrors.StatusError, so apierrors.IsNotFound, IsConflict,
// IsAlreadyExists, IsInvalid, IsForbidden and client.IgnoreNotFound work, and
// the causes of an Invalid error survive. Other failures (the host is
// unreachable, the context ended) are wrapped with %w and say what was being
// done.
//
// What maps to the Cluster service and how:
//   - Get and List, with every option of controller-runtime's ListOptions
//     (namespace, label and field selectors, limit, continue). The Uncached
//     option reads from the API server even when the host caches the kind;
//     RecordSource reports where a read was served from.
//   - Create, Update, Patch (merge, JSON, strategic merge and server-side
//     apply, with FieldOwner and ForceOwnership), Apply (apply
//     configurations) and Delete (PropagationPolicy, Preconditions,
//     GracePeriodSeconds), each with DryRunAll.
//   - DeleteAllOf lists the matching objects from the API server and deletes
//     them one by one: the Cluster service has no delete-collection call. It
//     is not atomic, and objects that are gone already are skipped.
//   - Status() and SubResource(name) update and patch subresources. An update
//     of a subresource with a body of another kind (a Scale for "scale") is
//     sent as a merge patch of the subresource with that body.
//     SubResource(name).Get reads a subresource ("status" is the object
//     itself; others, such as "scale", come from the API server), and
//     SubResource(name).Create creates one, such as the policy/v1 Eviction of
//     a Pod or the TokenRequest of a ServiceAccount.
//   - RESTMapper maps kinds to resources through the host's discovery
//     (ClusterService.ResolveKind), caching each answer.
package client
